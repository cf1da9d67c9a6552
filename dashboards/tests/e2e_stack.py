"""The end-to-end stack of test_e2e.py: a real Prometheus with
dashboards/prometheus (config and rules), every service, a service no dashboard names (e2e_byo.py: the standard
server and client histograms), and a short perfkit-load run against each service.

Every target reaches Prometheus the way the bench's do: a target file each (perfkit/perfkit/promsd.py) in a
directory the test config's file_sd_configs reads, with the labels job and service. The services' files are
written before Prometheus starts, the load engines' after it is up (so their discovery is live).

Binaries come from the environment (Bazel sets them from data deps):
  AURORA_BIN        //services/aurora_app:aurora_app
  PERFKIT_LOAD_BIN  //perfkit/load:perfkit-load
The Python services run as `python -m aquilia_app` / `python -m rpc_app` (their py_library deps).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dashlib import PROM_DIR, free_port, prom_api, prometheus_bin, start_and_read_port, stop, wait_http
from perfkit import promsd

# PERFMONO_E2E_LOAD_SECONDS=70 fills the 1m windows of the recording rules (used for the README previews).
LOAD_SECONDS = int(os.environ.get("PERFMONO_E2E_LOAD_SECONDS") or 10)
BYO = "e2e_byo"  # the service of e2e_byo.py, known to no dashboard


def _env_bin(name: str, target: str) -> str:
    path = os.environ.get(name)
    if not path or not os.access(path, os.X_OK):
        raise AssertionError(f"${name} must point to the executable of {target} (got {path!r}); "
                             f"run the test with `bazel test //dashboards:e2e_test`")
    return path


def _python_env() -> dict:
    env = dict(os.environ)
    # Outside Bazel (plain pytest from the repo root) make the service packages importable.
    repo = PROM_DIR.parent.parent
    extra = [str(repo / "services" / "aquilia_app" / "src"), str(repo / "services" / "rpc_app")]
    env["PYTHONPATH"] = os.pathsep.join([p for p in [env.get("PYTHONPATH")] if p] + extra)
    return env


def _test_config(tmp: Path, sd_dir: Path, prom_port: int) -> Path:
    """dashboards/prometheus/prometheus.yml reading its targets from ``sd_dir`` only, with a 1 s scrape interval."""
    text = (PROM_DIR / "prometheus.yml").read_text()
    text = text.replace("scrape_interval: 5s", "scrape_interval: 1s").replace("evaluation_interval: 5s",
                                                                                "evaluation_interval: 1s")
    for rule in ("recording.yml", "alerts.yml"):
        text = text.replace(f"- rules/{rule}", f"- {PROM_DIR / 'rules' / rule}")
    # the committed default-port targets are left out, the bench's directory is this run's
    assert "- targets/*.yml" in text and "- sd/*.json" in text, "prometheus.yml's file_sd files changed"
    text = re.sub(r"^\s*- targets/\*\.yml.*\n", "", text, flags=re.M).replace("- sd/*.json", f"- {sd_dir}/*.json")
    text = text.replace('"127.0.0.1:9090"', f'"127.0.0.1:{prom_port}"')
    code = "\n".join(line.split(" #")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
    for port in (8081, 8082, 8083, 9464, 9090):
        assert f":{port}" not in code, f"default port {port} left in the test config"
    assert "targets/" not in code and "relabel" not in code
    cfg = tmp / "prometheus.yml"
    cfg.write_text(text)
    return cfg


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    aurora = _env_bin("AURORA_BIN", "//services/aurora_app:aurora_app")
    load = _env_bin("PERFKIT_LOAD_BIN", "//perfkit/load:perfkit-load")
    procs: list[subprocess.Popen] = []
    try:
        p, aurora_port = start_and_read_port([aurora, "--port", "0", "--workers", "1"],
                                             r"listening on [\d.]+:(\d+)", 20, tmp / "aurora.log")
        procs.append(p)
        env = _python_env()
        p, aquilia_port = start_and_read_port(
            [sys.executable, "-m", "aquilia_app", "--port", "0", "--workers", "1"],
            r"listening on http://[\d.]+:(\d+)", 60, tmp / "aquilia.log", env=env)
        procs.append(p)
        p, rpc_port = start_and_read_port(
            [sys.executable, "-m", "rpc_app", "--port", "0", "--sample-every", "1"],
            r"listening on ws://[\d.]+:(\d+)", 60, tmp / "rpc.log", env=env)
        procs.append(p)
        p, byo_port = start_and_read_port(
            [sys.executable, str(Path(__file__).with_name("e2e_byo.py")), "--service", BYO],
            r"listening on http://[\d.]+:(\d+)", 30, tmp / "byo.log", env=env)
        procs.append(p)
        ports = {"aquilia_app": aquilia_port, "rpc_app": rpc_port, "aurora_app": aurora_port}
        load_ports = {svc: free_port() for svc in ports}
        prom_port = free_port()
        sd_dir = tmp / "sd"
        files = {svc: promsd.register_system(str(sd_dir), svc, f"http://127.0.0.1:{port}/metrics")
                 for svc, port in {**ports, BYO: byo_port}.items()}
        # Prometheus itself once more, under a job of its own: test_e2e withdraws this file and sees the target go
        files["withdraw"] = promsd.register(str(sd_dir), f"127.0.0.1:{prom_port}", job="e2e_withdrawn",
                                            service="e2e_withdrawn")
        cfg = _test_config(tmp, sd_dir, prom_port)
        prom = subprocess.Popen(
            [prometheus_bin(), f"--config.file={cfg}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=open(tmp / "prometheus.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(prom)
        base = f"http://127.0.0.1:{prom_port}"
        wait_http(f"{base}/-/ready", 30, prom)
        # the load engines' files, now that Prometheus runs: found by watching the directory, not at start-up
        for svc, lp in load_ports.items():
            files[f"load-{svc}"] = promsd.register_load(str(sd_dir), f"127.0.0.1:{lp}", svc)
        for svc, port in ports.items():
            wait_http(f"http://127.0.0.1:{port}/metrics", 10)
        # Ready is not scraping: target discovery hands its updates over every 5 s. Wait for the load engines'
        # targets too (down until their runs start), so that their runs are scraped from the start.
        deadline = time.monotonic() + 30
        while True:
            up = prom_api(base, "/api/v1/query", {"query": "up"})["result"]
            if ({r["metric"]["job"] for r in up if r["value"][1] == "1"} >= set(ports) | {BYO}
                    and sum(r["metric"]["job"] == "perfkit_load" for r in up) == len(load_ports)):
                break
            assert time.monotonic() < deadline, f"the services were not scraped within 30 s: {up}"
            time.sleep(0.2)

        t0 = time.time()
        runs = {
            "aurora_app": [f"http://127.0.0.1:{aurora_port}/json"],
            "aquilia_app": [f"http://127.0.0.1:{aquilia_port}/json"],
            "rpc_app": ["--ws", "--body", '{"method": "add", "params": [1, 2]}', f"ws://127.0.0.1:{rpc_port}/"],
        }
        rate = {"aurora_app": 300, "aquilia_app": 150, "rpc_app": 150}
        loaders = {}
        for svc, args in runs.items():
            loaders[svc] = subprocess.Popen(
                [load, "-t", "1", "-c", "2", "-d", f"{LOAD_SECONDS}s", "-R", str(rate[svc]),
                 "--metrics-addr", f"127.0.0.1:{load_ports[svc]}", "--scenario", f"e2e-{svc}", *args],
                stdout=open(tmp / f"load-{svc}.out", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(loaders[svc])
        for svc, lp in loaders.items():
            rc = lp.wait(timeout=LOAD_SECONDS + 60)
            assert rc == 0, f"perfkit-load against {svc} failed ({rc}): {(tmp / f'load-{svc}.out').read_text()[-2000:]}"
        time.sleep(3)  # last scrapes and rule evaluations
        yield {"base": base, "start": t0 - 5, "end": time.time(), "ports": ports, "tmp": tmp,
               "load_ports": load_ports, "byo_port": byo_port, "files": files}
    finally:
        for p in reversed(procs):
            stop(p)
