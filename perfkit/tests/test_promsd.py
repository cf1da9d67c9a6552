"""Prometheus target files (perfkit/perfkit/promsd.py): their format, their life span, and the bench writing one per
running system and per load run while it runs (and none when no directory is given)."""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from conftest import UVICORN_RAW, cli_env

from perfkit import promsd
from perfkit.runner import Settings


def _groups(path):
    with open(path) as f:
        doc = json.load(f)
    assert isinstance(doc, list) and len(doc) == 1, doc
    assert set(doc[0]) == {"targets", "labels"}, doc
    return doc[0]


def test_a_target_file_is_file_sd_json_and_goes_away(tmp_path):
    reg = promsd.register(str(tmp_path / "sd"), "127.0.0.1:9999", job="perfkit_load", service="aurora_app")
    files = os.listdir(tmp_path / "sd")
    assert files == [os.path.basename(reg.path)] and files[0].endswith(".json"), files
    g = _groups(reg.path)
    assert g == {"targets": ["127.0.0.1:9999"], "labels": {"job": "perfkit_load", "service": "aurora_app"}}
    reg.remove()
    reg.remove()  # idempotent
    assert os.listdir(tmp_path / "sd") == []


def test_two_registrations_of_one_service_get_two_files(tmp_path):
    a = promsd.register(str(tmp_path), "127.0.0.1:1", job="j", service="s")
    b = promsd.register(str(tmp_path), "127.0.0.1:2", job="j", service="s")
    assert a.path != b.path and len(os.listdir(tmp_path)) == 2
    with a, b:
        pass
    assert os.listdir(tmp_path) == []


def test_no_directory_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(promsd.ENV, raising=False)
    assert promsd.directory(None) is None
    assert Settings().prom_sd_dir is None
    assert promsd.register(None, "127.0.0.1:1", job="j", service="s") is None
    assert promsd.register_system(None, "x", "http://127.0.0.1:1/metrics") is None
    assert promsd.register_load("", "127.0.0.1:1", "x") is None
    monkeypatch.setenv(promsd.ENV, str(tmp_path))
    assert promsd.directory(None) == str(tmp_path)
    assert promsd.directory("/elsewhere") == "/elsewhere"


@pytest.mark.parametrize("url, target, extra", [
    ("http://127.0.0.1:8081/metrics", "127.0.0.1:8081", {}),
    ("http://127.0.0.1:8081/admin/metrics", "127.0.0.1:8081", {"__metrics_path__": "/admin/metrics"}),
    ("https://example.test/metrics", "example.test:443", {"__scheme__": "https"}),
    ("http://[::1]:9000/metrics", "[::1]:9000", {}),
])
def test_metrics_urls_become_targets(url, target, extra):
    assert promsd.url_target(url) == (target, extra)


def test_a_system_file_carries_its_metrics_path(tmp_path):
    reg = promsd.register_system(str(tmp_path), "aquilia_app", "http://127.0.0.1:4000/admin/metrics")
    assert _groups(reg.path)["labels"] == {"job": "aquilia_app", "service": "aquilia_app",
                                          "__metrics_path__": "/admin/metrics"}
    reg.remove()


@pytest.mark.parametrize("addr, target", [("127.0.0.1:9464", "127.0.0.1:9464"), ("0.0.0.0:9464", "127.0.0.1:9464"),
                                          ("[::]:9464", "[::1]:9464"), ("[::1]:9464", "[::1]:9464")])
def test_listen_addresses_become_targets(addr, target):
    assert promsd.addr_target(addr) == target


def test_files_left_registered_are_removed_at_exit(tmp_path):
    code = ("import sys; from perfkit import promsd; "
            "promsd.register(sys.argv[1], '127.0.0.1:1', job='j', service='s'); "
            "import os; print(len(os.listdir(sys.argv[1])))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=cli_env(),
                       timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stdout + r.stderr
    assert os.listdir(tmp_path) == []


SCENARIO = f'''
name = "sd"
kind = "server"
description = "a raw ASGI app with a metrics URL"

[[systems]]
name = "asgi-sd"
role = "service"
command = {UVICORN_RAW}
ready = "http://127.0.0.1:${{port}}/ping"
metrics = "http://127.0.0.1:${{port}}/metrics"

[[workloads]]
name = "ping"
path = "/ping"
connections = 2
'''


class _Watcher(threading.Thread):
    """Reads every target file that shows up in ``d`` while the bench runs; scrapes the load engines' targets."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.seen: dict[str, dict] = {}
        self.scraped: dict[str, str] = {}  # file -> a scrape of its target that answered
        self.shared: list[list[str]] = []  # files present together that named the same address
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            names = os.listdir(self.d) if os.path.isdir(self.d) else []
            self._note_shared_addresses(names)
            for name in names:
                path = os.path.join(self.d, name)
                try:
                    if name not in self.seen:
                        self.seen[name] = _groups(path)
                    g = self.seen[name]
                    if g["labels"]["job"] == "perfkit_load" and name not in self.scraped:
                        url = f"http://{g['targets'][0]}/metrics"
                        with urllib.request.urlopen(url, timeout=0.5) as r:
                            self.scraped[name] = r.read().decode()
                except (OSError, ValueError):  # gone meanwhile, or the engine not listening yet
                    pass
            time.sleep(0.02)

    def _note_shared_addresses(self, names):
        # Runs one after another may get a port the previous one let go; runs alive together may not share one.
        by_target: dict[str, list[str]] = {}
        for name in names:
            if name in self.seen:
                by_target.setdefault(self.seen[name]["targets"][0], []).append(name)
        self.shared += [same for same in by_target.values() if len(same) > 1]


def test_the_bench_writes_a_file_per_running_system_and_load_run(tmp_path, perfkit_load):
    scen = tmp_path / "scenarios"
    scen.mkdir()
    (scen / "sd.toml").write_text(SCENARIO)
    sd = tmp_path / "sd"
    watcher = _Watcher(str(sd))
    watcher.start()
    env = cli_env()
    env[promsd.ENV] = str(sd)  # the environment variable; --prom-sd-dir is the same
    r = subprocess.run(
        [sys.executable, "-m", "perfkit", "--scenarios", str(scen), "--repeat", "1", "--duration", "1.5",
         "--probe", "1.5", "--warmup", "0.2", "--search-steps", "0", "--quiet", "--out", str(tmp_path / "out"),
         "--bin", f"perfkit-load={perfkit_load}"],
        capture_output=True, text=True, env=env, timeout=180)
    time.sleep(0.2)
    watcher.stop.set()
    watcher.join(5)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    port = doc["scenarios"][0]["systems"][0]["port"]
    systems = [g for g in watcher.seen.values() if g["labels"]["job"] != "perfkit_load"]
    loads = {n: g for n, g in watcher.seen.items() if g["labels"]["job"] == "perfkit_load"}
    assert systems == [{"targets": [f"127.0.0.1:{port}"], "labels": {"job": "asgi-sd", "service": "asgi-sd"}}], \
        watcher.seen
    # the probe and the three constant rates: a load run each, named for the system; no two alive at once share
    # an address (one after another may: the OS hands out a port again once it is free)
    assert len(loads) >= 3, watcher.seen
    assert {g["labels"]["service"] for g in loads.values()} == {"asgi-sd"}
    assert watcher.shared == [], watcher.shared
    # each file named a live load engine: its metrics answered at that address, with this run's scenario
    assert watcher.scraped, "no load run's target answered a scrape"
    for text in watcher.scraped.values():
        assert 'scenario="sd/ping/asgi-sd"' in text and "perfkit_load_requests_total" in text
    # everything withdrawn once the bench is done
    assert os.listdir(sd) == []


def test_an_unwritable_directory_is_refused_up_front(tmp_path, tiny_dir, perfkit_load):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = subprocess.run(
        [sys.executable, "-m", "perfkit", "--scenarios", str(tiny_dir), "--prom-sd-dir", str(blocker / "sd"),
         "--out", str(tmp_path / "out"), "--bin", f"perfkit-load={perfkit_load}"],
        capture_output=True, text=True, env=cli_env(), timeout=60)
    assert r.returncode == 2 and "--prom-sd-dir" in r.stderr and "cannot write there" in r.stderr, r.stderr
