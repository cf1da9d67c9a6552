"""Bring your own service: the example scenario in perfkit/examples/byo is valid, and a server the bench did not
start (given by `url`) is benched beside one it starts."""

import json
import os
import socket
import subprocess
import sys
import time

from conftest import HERE, PERFKIT_DIR, run_cli

from perfkit import results
from perfkit.procs import free_port
from perfkit.scenarios import Registry, ScenarioError, load_file

import pytest


def test_the_example_scenario_is_valid():
    sc = load_file(os.path.join(PERFKIT_DIR, "examples", "byo", "byo.toml"))
    assert [s.name for s in sc.systems] == ["http-server", "nginx"]
    assert sc.workloads[0].slo_p99_us == 20_000


def _scenario(tmp_path, body: str) -> str:
    d = tmp_path / "sc"
    d.mkdir(exist_ok=True)
    (d / "mine.toml").write_text('name = "mine"\nkind = "server"\n' + body)
    return str(d)


@pytest.mark.parametrize("system, message", [
    ('url = "http://127.0.0.1:1"\ncommand = ["x"]', "already running: drop 'command'"),
    ('url = "http://127.0.0.1:1/some/path"', "without a path"),
    ('url = "ftp://127.0.0.1:1"', "must start with http://"),
    ('role = "peer"', "give 'command' and 'ready'"),
])
def test_bad_url_systems_are_refused_with_the_reason(tmp_path, system, message):
    d = _scenario(tmp_path, f'[[systems]]\nname = "x"\n{system}\n[[workloads]]\nname = "w"\n')
    with pytest.raises(ScenarioError, match=message):
        Registry.load(d)


def test_a_running_server_given_by_url_is_benched(tmp_path, perfkit_load):
    port = free_port()
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "cost_server.py"), "--port", str(port),
                               "--cost-us", "50"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        d = _scenario(tmp_path, f'''
[[systems]]
name = "running"
role = "service"
url = "http://127.0.0.1:{port}"

[[workloads]]
name = "get"
connections = 4
slo_p99 = "20ms"
''')
        out = tmp_path / "out"
        r = run_cli(["--scenarios", d, "--repeat", "1", "--duration", "1", "--probe", "1", "--warmup", "0.2",
                     "--search-steps", "2", "--quiet", "--out", str(out), "--bin", f"perfkit-load={perfkit_load}"],
                    timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        doc = json.loads((out / "results.json").read_text())
        results.validate(doc)
        sysrec = doc["scenarios"][0]["systems"][0]
        assert sysrec["status"] == "ok" and sysrec["command"] == []
        res = doc["scenarios"][0]["workloads"][0]["results"]["running"]
        assert res["max_rps"]["median"] > 100
        # answers all 2xx; only a shared rate it could not hold may leave requests unfinished
        assert set(res["failures"]) <= {"unfinished", "timeout"}, res["failures"]
        assert res["sustainable"]["rate"] and res["cpu_per_request_us"] is None  # not ours: no /proc figures
        assert server.poll() is None, "the bench must not stop a server it did not start"
    finally:
        server.terminate()
        server.wait(5)
