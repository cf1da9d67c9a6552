"""dashboards/obs.sh (what tools/obs runs): starts Prometheus with this repo's config and rules on
127.0.0.1, prints the URLs, and stops everything on Ctrl-C."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from dashlib import DASH, free_port, prom_api, stop

OBS = str(DASH / "obs.sh")


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(["bash", OBS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _read_until(proc: subprocess.Popen, marker: str, timeout: float) -> str:
    out = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        out += line
        if marker in line:
            return out
    raise AssertionError(f"no {marker!r} within {timeout} s; stdout: {out!r}; rc={proc.poll()}")


def test_starts_prometheus_with_the_rules_and_stops_on_ctrl_c():
    port = free_port()
    proc = _start("--prometheus-port", str(port))
    try:
        out = _read_until(proc, "obs: ready", 40)
        assert f"http://127.0.0.1:{port}/" in out
        base = f"http://127.0.0.1:{port}"
        groups = {g["name"] for g in prom_api(base, "/api/v1/rules", {})["groups"]}
        assert {"perfmono_http", "perfmono_hotpath", "perfmono_load", "perfmono_alerts"} <= groups
        deadline = time.monotonic() + 15  # target discovery runs after start-up
        while True:
            jobs = {t["labels"]["job"] for t in prom_api(base, "/api/v1/targets", {})["activeTargets"]}
            if len(jobs) >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert {"aquilia_app", "rpc_app", "aurora_app", "perfkit_load"} <= jobs
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        rc = proc.wait(timeout=20)
        rest = proc.stdout.read()
        assert rc == 0 and "obs: stopped" in rest, (rc, rest, proc.stderr.read())
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "Prometheus still listening after Ctrl-C"
    finally:
        stop(proc)


def test_a_busy_port_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = _start("--prometheus-port", str(port))
        try:
            rc = proc.wait(timeout=40)
            err = proc.stderr.read()
        finally:
            stop(proc)
    assert rc == 1
    assert "prometheus exited during start-up" in err and "address already in use" in err


@pytest.mark.parametrize("args, message", [
    (["--prometheus-port", "99999"], "--prometheus-port must be a port number"),
    (["--prometheus-port"], "--prometheus-port needs a value"),
    (["--bogus"], "unknown argument: --bogus"),
])
def test_bad_arguments(args, message):
    r = subprocess.run(["bash", OBS, *args], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)
