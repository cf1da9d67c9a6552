"""perfkit paired: the statistics (blocks, position effect, bootstrap intervals, verdict) and a short run
against real processes (a raw ASGI app against itself), with its bad-input errors."""

import json
import math
import statistics

import pytest
from conftest import run_cli

from perfkit import paired


def _round(order, b_rps, v_rps):
    return {"order": order, "base": {"rps": b_rps}, "variant": {"rps": v_rps},
            "throughput_ratio": v_rps / b_rps}


def test_a_block_cancels_a_position_effect():
    # the variant is 2 % slower; whichever system runs second in a round loses another 10 %
    rounds = [_round(["base", "variant"], 100.0, 98.0 * 0.9), _round(["variant", "base"], 100.0 * 0.9, 98.0)]
    (block,) = paired.block_ratios(rounds, "throughput_ratio")
    assert block == pytest.approx(0.98)
    # and the effect itself is visible: first ÷ second is 1 / 0.9 once the variant's 2 % is taken out
    pos = paired.position_ratios(rounds)
    assert pos == pytest.approx([1 / (0.98 * 0.9), 0.98 / 0.9])
    assert paired.geometric_mean(pos) == pytest.approx(1 / 0.9)


def test_blocks_skip_incomplete_pairs():
    r = _round(["base", "variant"], 100.0, 90.0)
    assert paired.block_ratios([r], "throughput_ratio") == []
    assert len(paired.block_ratios([r, r, r], "throughput_ratio")) == 1


def test_bootstrap_interval_brackets_the_estimate_and_is_reproducible():
    values = [0.9, 0.95, 1.0, 1.02, 0.97, 0.99, 1.05, 0.93, 0.96, 1.01]
    lo, hi = paired.bootstrap_interval(values, statistics.median, seed=7)
    assert lo <= statistics.median(values) <= hi
    assert min(values) <= lo < hi <= max(values)
    assert (lo, hi) == paired.bootstrap_interval(values, statistics.median, seed=7)
    assert paired.bootstrap_interval([1.0] * 5, statistics.median) == (1.0, 1.0)
    # more data, narrower interval
    wide = paired.bootstrap_interval(values, statistics.median)
    narrow = paired.bootstrap_interval(values * 10, statistics.median)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]


def test_summary_and_verdict():
    s = paired.summarise([0.97, 0.98, 0.99, 1.0, 1.01] * 4)
    assert s["n"] == 20 and s["median"] == pytest.approx(0.99) and s["above_1"] == 4
    assert s["geomean"] == pytest.approx(math.exp(statistics.fmean(math.log(v) for v in [0.97, 0.98, 0.99, 1.0, 1.01])))
    assert paired.verdict(s, 0.05) == "within"
    assert paired.verdict(s, 0.005) == "undecided"  # the interval straddles 0.995
    assert paired.verdict(paired.summarise([0.8, 0.82, 0.81, 0.79] * 5), 0.05) == "over"
    assert paired.verdict(s, None) is None
    assert paired.verdict(s, 0.05, cpu_share=0.5) == "within"
    assert paired.verdict(s, 0.05, cpu_share=0.36) == "undecided"  # concurrent, one side not saturated
    assert paired.verdict(paired.summarise([]), 0.05) is None


@pytest.mark.parametrize("concurrent", [False, True], ids=["one-after-the-other", "concurrent"])
def test_paired_run_end_to_end(tmp_path, tiny_dir, perfkit_load, concurrent):
    out = tmp_path / "out"
    r = run_cli(["paired", "tiny/asgi-a", "tiny/asgi-b", "--scenarios", str(tiny_dir), "--rounds", "4",
                 "--round", "0.5", "--warmup", "0.3", "--max-cost", "60%", "--out", str(out),
                 "--bin", f"perfkit-load={perfkit_load}"] + (["--concurrent"] if concurrent else []), timeout=120)
    # the same app on both sides: well within 60 % of itself
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Verdict: within" in r.stdout
    rec = json.loads((out / "paired.json").read_text())
    assert rec["status"] == "ok" and rec["verdict"] == "within"
    assert rec["base"] == "asgi-a" and rec["variant"] == "asgi-b" and rec["workload"]["path"] == "/ping"
    assert [x["order"] for x in rec["rounds"]] == [["base", "variant"], ["variant", "base"]] * 2
    for x in rec["rounds"]:
        for side in ("base", "variant"):
            assert x[side]["rps"] > 50 and x[side]["errors"] == 0 and x[side]["failed_answers"] == 0
            assert 0 < x[side]["cpu_us_per_request"] < 1e6
        assert x["throughput_ratio"] == pytest.approx(x["variant"]["rps"] / x["base"]["rps"])
    t = rec["throughput_ratio"]
    assert t["n"] == 2 and t["median_ci95"][0] <= t["median"] <= t["median_ci95"][1]
    assert rec["first_over_second"]["n"] == 4 and rec["settings"]["concurrent"] is concurrent
    if concurrent:  # both loaded at once on one CPU set: each got a real share of the CPU time
        share = sum(x["base"]["cpu_s"] for x in rec["rounds"]) / sum(
            x["base"]["cpu_s"] + x["variant"]["cpu_s"] for x in rec["rounds"])
        assert 0.2 < share < 0.8
        assert "both systems loaded at the same time" in (out / "paired.md").read_text()
    assert {s["name"] for s in rec["systems"]} == {"asgi-a", "asgi-b"}
    assert all(s["cpu_seconds"] > 0 for s in rec["systems"])
    md = (out / "paired.md").read_text()
    assert "| req/s |" in md and "Failed requests" not in md


def test_a_variant_that_cannot_start_fails_clearly(tmp_path, tiny_dir, perfkit_load):
    out = tmp_path / "out"
    r = run_cli(["paired", "tiny/asgi-a", "tiny/broken", "--scenarios", str(tiny_dir), "--rounds", "2",
                 "--round", "0.3", "--out", str(out), "--bin", f"perfkit-load={perfkit_load}"], timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    rec = json.loads((out / "paired.json").read_text())
    assert rec["status"] == "failed" and "boom: cannot bind anything" in rec["error"]
    assert rec["rounds"] == []


@pytest.mark.parametrize("args, message", [
    (["tiny/asgi-a", "tiny/asgi-b", "--rounds", "3"], "even number"),
    (["tiny/asgi-a", "tiny/nope"], "unknown system 'nope'"),
    (["tiny/asgi-a", "tiny/asgi-a"], "the same system"),
    (["asgi-a", "tiny/asgi-b"], "SCENARIO/SYSTEM"),
    (["tiny/asgi-a", "tinyclient/requests"], "same scenario"),
    (["tinyclient/urllib3", "tinyclient/requests"], "client scenario"),
    (["tiny/asgi-a", "tiny/asgi-b", "--workload", "nope"], "unknown workload 'nope'"),
    (["tiny/asgi-a", "tiny/asgi-b", "--max-cost", "150%"], "between 0 and 1"),
])
def test_bad_input_is_refused_before_anything_starts(tiny_dir, args, message):
    r = run_cli(["paired", "--scenarios", str(tiny_dir)] + args, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr


def test_the_report_flags_failed_requests_next_to_the_figures():
    side = {"rps": 1000.0, "errors": 0, "failed_answers": 0, "cpu_s": 1.0, "cpu_us_per_request": 500.0}
    bad = dict(side, failed_answers=12)
    rounds = [{"order": ["base", "variant"], "base": side, "variant": bad, "throughput_ratio": 1.0, "cpu_ratio": 1.0},
              {"order": ["variant", "base"], "base": side, "variant": bad, "throughput_ratio": 1.0, "cpu_ratio": 1.0}]
    rec = {"scenario": "s", "base": "a", "variant": "b", "status": "ok", "rounds": rounds,
           "workload": {"name": "w", "method": "GET", "path": "/", "connections": 4},
           "settings": {"rounds": 2, "round_s": 1.0, "max_cost": 0.05, "concurrent": False},
           "throughput_ratio": paired.summarise([1.0]), "cpu_per_request_ratio": paired.summarise([1.0]),
           "first_over_second": paired.summarise([1.0, 1.0]), "verdict": "within"}
    md = paired.render(rec)
    assert "**Failed requests** (errors, timeouts, non-2xx or JSON-RPC error answers): base 0, variant 24." in md
    assert "**Verdict: within**" in md and "| req/s | 1.000 |" in md


def test_an_uneven_cpu_split_is_called_out_in_concurrent_mode():
    def rnd(order, base_cpu):
        side = {"rps": 1000.0, "errors": 0, "failed_answers": 0, "cpu_us_per_request": 500.0}
        return {"order": order, "base": dict(side, cpu_s=base_cpu), "variant": dict(side, cpu_s=1.0),
                "throughput_ratio": 1.0, "cpu_ratio": 1.0}

    def md(base_cpu):
        rounds = [rnd(["base", "variant"], base_cpu), rnd(["variant", "base"], base_cpu)]
        return paired.render({
            "scenario": "s", "base": "a", "variant": "b", "status": "ok", "rounds": rounds, "verdict": None,
            "workload": {"name": "w", "mode": "ws", "method": "GET", "path": "/", "connections": 4},
            "settings": {"rounds": 2, "round_s": 1.0, "max_cost": None, "concurrent": True},
            "throughput_ratio": paired.summarise([1.0]), "cpu_per_request_ratio": paired.summarise([1.0]),
            "first_over_second": paired.summarise([1.0, 1.0])})

    assert "median 0.500" in md(1.0) and "Uneven CPU split" not in md(1.0)
    assert "WebSocket /" in md(1.0)
    uneven = md(0.5)  # the base got a third of the CPU time
    assert "median 0.333" in uneven and "**Uneven CPU split**" in uneven
    rounds = [rnd(["base", "variant"], 0.5), rnd(["variant", "base"], 0.5)]
    assert paired.base_cpu_share(rounds) == pytest.approx(1 / 3)


TLS_SCENARIO = """
name = "tinytls"
kind = "server"
description = "a raw ASGI app over HTTPS against itself"

[[systems]]
name = "https-a"
role = "service"
tls = true
command = ["${python}", "-m", "uvicorn", "raw_asgi:app", "--app-dir", "${peers}", "--host", "127.0.0.1",
           "--port", "${port}", "--loop", "asyncio", "--http", "h11", "--no-access-log", "--log-level", "warning",
           "--ssl-certfile", "${tls_cert}", "--ssl-keyfile", "${tls_key}"]
ready = "tcp://127.0.0.1:${port}"

[[systems]]
name = "https-b"
role = "floor"
tls = true
command = ["${python}", "-m", "uvicorn", "raw_asgi:app", "--app-dir", "${peers}", "--host", "127.0.0.1",
           "--port", "${port}", "--loop", "asyncio", "--http", "h11", "--no-access-log", "--log-level", "warning",
           "--ssl-certfile", "${tls_cert}", "--ssl-keyfile", "${tls_key}"]
ready = "tcp://127.0.0.1:${port}"

[[workloads]]
name = "ping"
path = "/ping"
connections = 4
"""


def test_tls_systems_are_driven_over_https(tmp_path, perfkit_load):
    """A system with tls = true gets a certificate made for the run, and the load engine trusts it: every
    request of the run is answered over HTTPS (a plain-HTTP request to these servers would fail)."""
    d = tmp_path / "scenarios"
    d.mkdir()
    (d / "tinytls.toml").write_text(TLS_SCENARIO)
    out = tmp_path / "out"
    r = run_cli(["paired", "tinytls/https-a", "tinytls/https-b", "--scenarios", str(d), "--rounds", "2",
                 "--round", "0.5", "--warmup", "0.3", "--out", str(out), "--bin", f"perfkit-load={perfkit_load}"],
                timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((out / "paired.json").read_text())
    assert rec["status"] == "ok"
    for x in rec["rounds"]:
        for side in ("base", "variant"):
            assert x[side]["rps"] > 20 and x[side]["errors"] == 0 and x[side]["failed_answers"] == 0
