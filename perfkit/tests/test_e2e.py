"""A short end-to-end run against real processes: one server scenario (a raw ASGI app against itself, plus a
system that cannot start) and one client scenario; results.json valid against its schema, report.md and
report.html written; a failed system reported with its log tail while the suite goes on."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import cli_env, run_cli
from prometheus_client.parser import text_string_to_metric_families

from perfkit import results
from perfkit.procs import free_port


def test_server_and_client_scenarios_end_to_end(tmp_path, tiny_dir, perfkit_load, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("PERFMONO_CACHE", str(tmp_path / "cache"))  # the opt-in requestx env: not built here
    r = run_cli(["--scenarios", str(tiny_dir), "--repeat", "2", "--duration", "1", "--probe", "1",
                 "--warmup", "0.2", "--out", str(out), "--bin", f"perfkit-load={perfkit_load}"], timeout=150)
    # a system failed to start: exit status 1, the rest was measured
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"results in {out}" in r.stdout
    doc = json.loads((out / "results.json").read_text())
    results.validate(doc)  # raises on any mismatch with perfkit/results.schema.json
    assert doc["interrupted"] is False and doc["settings"]["repeat"] == 2
    assert doc["cpu_sets"]["systems"] is not None and doc["git_commit"]
    by_name = {sc["name"]: sc for sc in doc["scenarios"]}
    # the run index beside the run folder: one line per run with the headline of each scenario/workload
    (line,) = (tmp_path / "index.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["out"] == "out" and entry["created"] == doc["created"] and entry["suite"] == "quick"
    assert {(h["scenario"], h["workload"], h["service"]) for h in entry["headlines"]} == {
        ("tiny", "ping", "asgi-a"), ("tinyclient", "ping", "urllib3")}

    tiny = by_name["tiny"]
    assert tiny["status"] == "partial"
    systems = {s["name"]: s for s in tiny["systems"]}
    assert systems["broken"]["status"] == "failed"
    assert "exited with status 3" in systems["broken"]["error"]
    assert "boom: cannot bind anything" in systems["broken"]["log_tail"]
    for name in ("asgi-a", "asgi-b"):
        assert systems[name]["status"] == "ok"
        assert systems[name]["peak_rss_bytes"] > 5 << 20
        assert systems[name]["cpu_seconds"] > 0
    w = tiny["workloads"][0]
    assert len(w["rates"]) == 3
    # repeat rounds alternate direction (ABBA): the second round is the first reversed
    assert len(w["order"]) == 2 and set(w["order"][0]) == {"asgi-a", "asgi-b"}
    assert w["order"][1] == w["order"][0][::-1]
    slowest = min(w["results"][n]["max_rps"]["median"] for n in ("asgi-a", "asgi-b"))
    assert abs(w["rates"][2] - 0.9 * slowest) < 1.0  # the same absolute rates for both, from the slowest
    assert w["results"][w["rate_reference"]]["max_rps"]["median"] == slowest
    for name in ("asgi-a", "asgi-b"):
        res = w["results"][name]
        assert len(res["max_rps"]["values"]) == 2 and res["max_rps"]["median"] > 50
        assert [lv["target_rate"] for lv in res["levels"]] == w["rates"]
        for lv in res["levels"]:
            assert len(lv["achieved_rate"]["values"]) == 2
            assert lv["latency_us"]["p50"]["median"] > 0
            assert lv["latency_us"]["p99"]["median"] >= lv["latency_us"]["p50"]["median"]
            assert lv["spectrum"] and lv["spectrum"][-1][1] >= lv["spectrum"][1][1]
            assert lv["timeline"] and lv["timeline"][0]["rate"] > 0
        # every answer was a 200; only a shared rate the system did not hold (90 % of the slowest's max, on a
        # busy machine) may leave requests unanswered, and those are errors
        assert set(res["failures"]) <= {"unfinished", "timeout"}, res["failures"]
        if all(lv["held"] for lv in res["levels"]):
            assert res["errors"] == 0, res["failures"]
        # the headline: a sustained rate within the default SLO, bounded by the runs, and CPU per request
        sus = res["sustainable"]
        assert sus["slo_p99_us"] == w["slo_p99_us"] == 10_000
        assert sus["rate"] and all(s["rate"] <= sus["rate"] for s in sus["steps"] if s["ok"])
        assert all(s["rate"] > sus["rate"] for s in sus["steps"] if not s["ok"])
        assert w["cpu_rate"] in w["rates"] and res["cpu_per_request_us"]["median"] > 0
        assert res["load_generator_bound"] is False  # a Python server, one core: never the engine's limit

    client = by_name["tinyclient"]
    assert client["status"] == "ok"
    cw = client["workloads"][0]
    assert cw["order"][1] == cw["order"][0][::-1] and "requests" in cw["order"][0]
    for name in ("urllib3", "requests", "niquests"):
        res = cw["results"][name]
        assert res["max_rps"]["median"] > 20 and res["errors"] == 0
        assert res["latency_us"]["p50"]["median"] > 0
    vers = {s["name"]: s["version"] for s in client["systems"]}
    assert vers["urllib3"][0].isdigit() and vers["requests"][0].isdigit()
    # niquests ran in its own interpreter on @pypi_niquests: its urllib3 is urllib3-future, while the
    # requests driver (the bench's environment) imported the real urllib3 - and niquests is not in the main env
    csys = {s["name"]: s for s in client["systems"]}
    assert csys["niquests"]["status"] == "ok" and csys["niquests"]["environment"] == "pypi_niquests"
    assert csys["niquests"]["version"][0].isdigit()
    assert csys["niquests"]["urllib3"].startswith("urllib3-future "), csys["niquests"]
    assert csys["requests"]["environment"] == "main"
    assert csys["requests"]["urllib3"].startswith("urllib3 "), csys["requests"]
    # the opt-in client without its environment: skipped with the build hint, not a failure of the scenario
    assert csys["requestx"]["status"] == "skipped" and "requestx" not in cw["results"]
    assert csys["requestx"]["error"] == f"skipped: not built, run build_it.sh {sys.executable} (~20 min)"
    assert cw["results"]["niquests"]["errors"] == 0 and cw["results"]["niquests"]["max_rps"]["median"] > 20

    md = (out / "report.md").read_text()
    assert "| tiny / ping |" in md and "| tinyclient / ping |" in md
    assert "**broken failed**" in md and "boom: cannot bind anything" in md
    assert "asgi-a" in md and "÷ floor" in md
    assert "**requestx skipped**: skipped: not built, run build_it.sh" in md
    html = (out / "report.html").read_text()
    assert "<img" not in html and html.count('class="perfkit-chart"') >= 4
    for chart in ("tiny-ping-latency-vs-rate", "tiny-ping-spectrum", "tiny-ping-throughput",
                  "tinyclient-ping-throughput"):
        assert f'<div id="chart-{chart}" class="perfkit-chart">' in html, chart
    assert "boom: cannot bind anything" in html

    # the reports re-render from results.json alone
    os.unlink(out / "report.md")
    r = run_cli(["report", str(out)], timeout=60)
    assert r.returncode == 0, r.stderr
    assert (out / "report.md").read_text() == md


def test_metrics_addr_serves_live_load_metrics_during_a_run(tmp_path, tiny_dir, perfkit_load):
    """--metrics-addr: while the bench runs, a Prometheus-style scrape of that address returns the load engine's
    live series, labelled with scenario/workload/system, for the closed-loop probe and the constant-rate runs."""
    port = free_port()
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfkit", "--scenarios", str(tiny_dir), "--only", "tiny/asgi-a", "--repeat", "1",
         "--duration", "1", "--probe", "1", "--warmup", "0.2", "--out", str(out), "--quiet",
         "--bin", f"perfkit-load={perfkit_load}", "--metrics-addr", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env())
    scrapes, target_rates, max_ok = 0, set(), 0.0
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                text = r.read().decode()
        except OSError:  # between two load runs nothing listens: a real Prometheus sees a failed scrape too
            time.sleep(0.05)
            continue
        scrapes += 1
        for fam in text_string_to_metric_families(text):
            for smp in fam.samples:
                assert smp.labels.get("scenario") == "tiny/ping/asgi-a", smp
                if smp.name == "perfkit_load_requests_total" and smp.labels["outcome"] == "2xx":
                    max_ok = max(max_ok, smp.value)
                if smp.name == "perfkit_load_target_rate":
                    target_rates.add(smp.value)
        time.sleep(0.05)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output
    assert scrapes >= 5, output
    assert max_ok > 10, (max_ok, output)
    assert 0.0 in target_rates and any(r > 0 for r in target_rates), target_rates  # probe, then fixed rates
    assert json.loads((out / "results.json").read_text())["scenarios"][0]["status"] == "ok"
    # after the run nothing is left listening there
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)


def test_metrics_addr_is_checked_before_anything_starts(tmp_path, tiny_dir, perfkit_load):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        for addr, message in ((f"127.0.0.1:{busy}", "cannot listen there"), ("localhost:9464", "not an IP address"),
                              ("9464", "use HOST:PORT")):
            r = run_cli(["--scenarios", str(tiny_dir), "--out", str(tmp_path / "o"), "--bin",
                         f"perfkit-load={perfkit_load}", "--metrics-addr", addr], timeout=60)
            assert r.returncode == 2 and message in r.stderr, (addr, r.stderr)
