"""The bench's headline on servers whose behaviour is known: the sustainable-throughput search finds the capacity
of a server that spends a fixed CPU time per request, rates a system cannot hold are marked, failed answers are
errors (and nothing with failures is called sustained), and a closed-loop probe limited by the load engine is
marked load-generator bound."""

import json
import os
import shutil

import pytest
from conftest import HERE, run_cli

from perfkit import results

COST_US = 4000  # the synthetic server's CPU per request: a capacity of 250 req/s (its own overhead is ~3 %)

SCENARIO = f'''
name = "known"
kind = "server"
description = "servers of known behaviour"
# the rates shared by every system come from nginx's max: far beyond what the costly servers hold
rate_reference = "nginx"

[[systems]]
name = "costly"
role = "service"
command = ["${{python}}", "{HERE}/cost_server.py", "--port", "${{port}}", "--cost-us", "{COST_US}"]
ready = "tcp://127.0.0.1:${{port}}"

[[systems]]
name = "failing"
role = "peer"
command = ["${{python}}", "{HERE}/cost_server.py", "--port", "${{port}}", "--cost-us", "100", "--fail-every", "10"]
ready = "tcp://127.0.0.1:${{port}}"

[[systems]]
name = "nginx"
role = "floor"
command = ["${{bin:nginx}}", "-e", "${{tmp}}/error.log", "-p", "${{tmp}}", "-c", "${{tmp}}/nginx.conf"]
ready = "http://127.0.0.1:${{port}}/big.bin"

[systems.files]
"nginx.conf" = """
worker_processes 1;
daemon off;
# one process as the bench's user: it reads the files of its folder (a worker of a root master drops to nobody)
master_process off;
pid ${{tmp}}/nginx.pid;
error_log ${{tmp}}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    client_body_temp_path ${{tmp}}/body;
    proxy_temp_path ${{tmp}}/proxy;
    fastcgi_temp_path ${{tmp}}/fastcgi;
    uwsgi_temp_path ${{tmp}}/uwsgi;
    scgi_temp_path ${{tmp}}/scgi;
    sendfile on;
    server {{ listen 127.0.0.1:${{port}}; root {{www}}; }}
}}
"""

[[workloads]]
name = "get"
path = "/big.bin"
connections = 16
slo_p99 = "50ms"
'''


@pytest.fixture(scope="module")
def known(tmp_path_factory, perfkit_load):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(nginx, os.X_OK):
        pytest.fail("nginx is needed (tools/bazel installs nginx-light)")
    d = tmp_path_factory.mktemp("known")
    (d / "scenarios").mkdir()
    # nginx sends a 1 MiB file with sendfile (no copy on its side) while the engine copies every byte it
    # reads: one engine thread saturates long before nginx's worker
    (d / "www").mkdir()
    (d / "www" / "big.bin").write_bytes(b"x" * (1 << 20))
    (d / "scenarios" / "known.toml").write_text(SCENARIO.replace("{www}", str(d / "www")))
    out = d / "out"
    r = run_cli(["--scenarios", str(d / "scenarios"), "--repeat", "1", "--duration", "1.5", "--probe", "1",
                 "--warmup", "0.3", "--search-steps", "6", "--out", str(out), "--quiet",
                 "--bin", f"perfkit-load={perfkit_load}", "--bin", f"nginx={nginx}"], timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "results.json").read_text())
    results.validate(doc)
    return doc["scenarios"][0]["workloads"][0]


def test_the_search_finds_the_capacity_of_a_server_of_known_cost(known):
    res = known["results"]["costly"]
    found = res["sustainable"]["rate"]
    capacity = 1e6 / COST_US
    assert found is not None and abs(found - capacity) <= 0.1 * capacity, res["sustainable"]
    assert known["slo_p99_us"] == 50_000 and res["sustainable"]["slo_p99_us"] == 50_000
    # every step it called sustained held its rate within the SLO without a failure
    for step in res["sustainable"]["steps"]:
        assert step["ok"] == (step["held"] and step["p99_us"] <= 50_000 and step["failed"] == 0), step
    assert any(not s["ok"] for s in res["sustainable"]["steps"]), "the search never looked above the capacity"


def test_rates_a_system_cannot_hold_are_marked_not_held(known):
    res = known["results"]["costly"]
    assert known["rates"] and min(known["rates"]) > 3 * 1e6 / COST_US  # nginx's max sets them
    for lv in res["levels"]:
        assert lv["held"] is False
        assert lv["achieved_rate"]["median"] < 0.9 * lv["target_rate"]
    # held means: the schedule held and >= 99 % of the target answered, for every repeat
    for lv in known["results"]["nginx"]["levels"]:
        assert not lv["held"] or lv["achieved_rate"]["min"] >= 0.99 * lv["target_rate"], lv


def test_cpu_per_request_is_the_servers_cpu_time_per_answer(known):
    # the comparison rate is one every system held; none of the shared rates was, so the lowest is used
    assert known["cpu_rate"] == min(known["rates"])
    cpu = known["results"]["costly"]["cpu_per_request_us"]
    assert cpu is not None and 0.9 * COST_US <= cpu["median"] <= 2.0 * COST_US, cpu


def test_failed_answers_are_errors_and_never_sustained(known):
    res = known["results"]["failing"]
    assert res["errors"] > 0 and res["failures"].get("5xx", 0) > 0, res
    assert res["errors"] >= res["failures"]["5xx"]
    assert res["sustainable"]["rate"] is None
    assert all(not s["ok"] and s["failed"] > 0 for s in res["sustainable"]["steps"])
    assert known["results"]["costly"]["errors"] == sum(
        v for k, v in known["results"]["costly"]["failures"].items())


def test_a_closed_loop_probe_limited_by_the_load_engine_is_marked(known):
    # the engine reading nginx's 1 MiB answers is the limit; against the costly server it idles
    nginx, costly = known["results"]["nginx"], known["results"]["costly"]
    assert nginx["load_generator_bound"] is True, nginx["probe_engine_busy"]
    assert costly["load_generator_bound"] is False
    assert max(costly["probe_engine_busy"]["values"]) < 0.5
    for res in (nginx, costly):
        assert res["load_generator_bound"] == (max(res["probe_engine_busy"]["values"]) > 0.9)


HICCUP_COST_US = 1000
HICCUP_SCENARIO = f'''
name = "hiccup"
kind = "server"
description = "a server of known cost that stalls once, during its last shared-rate run"
rate_reference = "hiccup"

[[systems]]
name = "hiccup"
role = "service"
# runs of 4 connections each: the probe (1-4), then the shared rates at 50, 75 and 90 % of its max (5-8,
# 9-12, 13-16): connection 13 stalls the server during the 90 % run only
command = ["${{python}}", "{HERE}/cost_server.py", "--port", "${{port}}", "--cost-us", "{HICCUP_COST_US}",
           "--stall-at-connection", "13", "--stall-ms", "400"]
ready = "tcp://127.0.0.1:${{port}}"

[[workloads]]
name = "get"
path = "/"
connections = 4
slo_p99 = "50ms"
'''


def test_a_shared_rate_failed_below_the_max_is_run_again_before_it_bounds_the_search(tmp_path, perfkit_load):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "hiccup.toml").write_text(HICCUP_SCENARIO)
    out = tmp_path / "out"
    r = run_cli(["--scenarios", str(tmp_path / "scenarios"), "--repeat", "1", "--duration", "1.5", "--probe", "1",
                 "--warmup", "0.3", "--search-steps", "2", "--out", str(out), "--quiet",
                 "--bin", f"perfkit-load={perfkit_load}"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "results.json").read_text())
    results.validate(doc)
    w = doc["scenarios"][0]["workloads"][0]
    res, top = w["results"]["hiccup"], w["rates"][-1]
    stalled = res["levels"][-1]
    assert stalled["target_rate"] == top and stalled["latency_us"]["p99"]["median"] >= 300_000, stalled  # the stall hit it
    sustainable = res["sustainable"]
    first = sustainable["steps"][0]
    assert first["retest"] is True and first["rate"] == top, sustainable  # run again before it bounds anything
    assert not any(s.get("retest") for s in sustainable["steps"][1:])
    # Without the stall the rate holds (3 of 3 runs alone); a loaded host can still fail it, and then the
    # retest, not the stalled run, is what bounds the search from above.
    if first["ok"]:
        assert sustainable["bounds"][0] == top and sustainable["rate"] >= top, sustainable
    else:
        assert sustainable["bounds"][1] == top and sustainable["rate"] < top, sustainable
