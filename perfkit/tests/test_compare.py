"""compare: runs measured differently are refused (unless --force); a planted 30 % regression is flagged and a
2 % change is not, under realistic repeat noise; level latency only at the same absolute rate; failed answers."""

import json
import re

import pytest
from conftest import run_cli
from noisy_doc import make_doc

from perfkit import compare, results, stats

def _by_key(changes):
    return {c.key: c for c in changes}


def test_judge_bootstrap_and_single_value_fallback():
    a = [1000.0, 1021.0, 985.0]
    ratio, ci, verdict = compare.judge(a, [700.0, 716.0, 688.0], True)
    assert verdict == "worse" and ci[1] < 0.95 and ratio == pytest.approx(0.7)
    assert compare.judge(a, [985.0, 1003.0, 968.0], True)[2] == "same"  # -2 %
    # throughput +30 % is better; latency +30 % is worse
    assert compare.judge(a, [1300.0, 1327.0, 1280.0], True)[2] == "better"
    assert compare.judge(a, [1300.0, 1327.0, 1280.0], False)[2] == "worse"
    # a 20 % drop hidden in ±40 % noise: the ratio moved, the interval does not say so
    ratio, ci, verdict = compare.judge([600.0, 1000.0, 1400.0], [480.0, 800.0, 1120.0], True)
    assert verdict == "unclear" and ci[0] < 0.95 < ci[1]
    # two repeats (the quick suite): the interval is [min B / max A, max B / min A]
    ratio, ci, verdict = compare.judge([1000.0, 1030.0], [700.0, 690.0], True)
    assert verdict == "worse" and ci == pytest.approx([690 / 1030, 700 / 1000])
    assert compare.judge([1000.0, 1030.0], [995.0, 1001.0], True)[2] == "same"
    c = _by_key(compare.compare(make_doc(repeat=2), make_doc(2, repeat=2)))["app/json/svc/max_rps"]
    assert c.note == compare.TWO_REPEATS
    # one value per side: the ratio alone against the minimum change, no interval
    assert compare.judge([1000.0], [700.0], True) == (0.7, None, "worse")
    assert compare.judge([1000.0], [980.0], True) == (0.98, None, "same")
    assert compare.judge(a, [700.0, 716.0, 688.0], True, seed=3) == compare.judge(a, [700.0, 716.0, 688.0], True,
                                                                                 seed=3)


@pytest.mark.parametrize("repeat", [2, 3])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_planted_30_percent_regression_is_flagged_2_percent_is_not(seed, repeat):
    base = make_doc(seed, repeat=repeat)
    worse = _by_key(compare.compare(base, make_doc(seed + 100, scale=0.70, cpu_scale=1.30, p99_scale=1.30,
                                                   repeat=repeat)))
    for key in ("app/json/svc/max_rps", "app/json/svc/cpu_per_request_us", "app/json/svc/p99@4500",
                "app/json/svc/sustainable_rate"):
        assert worse[key].verdict == "worse", worse[key].line()
    assert worse["app/json/svc/max_rps"].ratio == pytest.approx(0.70, abs=0.05)
    assert worse["app/json/peer/max_rps"].verdict == "same"
    small = _by_key(compare.compare(base, make_doc(seed + 100, scale=0.98, cpu_scale=1.02, p99_scale=1.02,
                                                   repeat=repeat)))
    assert not [c.line() for c in small.values() if c.verdict == "worse"]


def test_one_repeat_falls_back_to_the_minimum_change():
    a, b = make_doc(1, repeat=1), make_doc(2, repeat=1, scale=0.7)
    for doc in (a, b):  # one value per side, as a run with --repeat 1 gives
        r = doc["scenarios"][0]["workloads"][0]["results"]["svc"]
        r["max_rps"] = stats.summary(r["max_rps"]["values"][:1])
    c = _by_key(compare.compare(a, b))["app/json/svc/max_rps"]
    assert c.verdict == "worse" and c.interval is None and compare.NO_INTERVAL in c.line()


def test_level_latency_only_at_the_same_absolute_rate():
    base = make_doc()
    # the rate reference's max moved 5 %: every shared rate moved with it
    moved = _by_key(compare.compare(base, make_doc(2, rate_scale=1.05)))
    assert not any("p99@" in k or "p50@" in k for k in moved)
    nc = moved["app/json/svc/level 90%"]
    assert nc.verdict == "not comparable"
    assert nc.line().endswith("not comparable: measured at 4,500 vs 4,725 req/s")
    assert moved["app/json/svc/cpu_per_request_us"].verdict == "not comparable"
    # within 1 %: the same rate
    close = _by_key(compare.compare(base, make_doc(2, rate_scale=1.005)))
    assert close["app/json/svc/p99@4500"].verdict == "same"
    assert close["app/json/svc/cpu_per_request_us"].verdict == "same"


def test_a_rate_no_longer_held_is_worse_and_a_bound_max_is_not_compared():
    c = _by_key(compare.compare(make_doc(), make_doc(2, held=False, peer_bound=True)))
    held = c["app/json/svc/held@4500"]
    assert held.verdict == "worse" and "B did not hold 4,500 req/s" in held.note
    assert "app/json/svc/p99@4500" not in c and c["app/json/svc/p99@2500"].verdict == "same"
    assert c["app/json/peer/max_rps"].verdict == "not comparable"
    assert "load-generator bound in B" in c["app/json/peer/max_rps"].note


def test_failed_answers():
    def errors(a, b):
        return _by_key(compare.compare(make_doc(errors=a), make_doc(2, errors=b)))["app/json/svc/errors"].verdict

    assert errors(0, 3) == "worse"  # any from none
    assert errors(100, 103) == "same"  # within 5 %
    assert errors(100, 200) == "worse"
    assert errors(100, 10) == "better"
    assert errors(0, 0) == "same"


def test_sustainable_rate_lost_and_a_failed_system():
    b = make_doc(2, sustainable=None)
    b["scenarios"][0]["systems"][1].update(status="failed", error="peer: exited with status 1\nlog")
    c = _by_key(compare.compare(make_doc(), b))
    assert c["app/json/svc/sustainable_rate"].verdict == "worse"
    assert "no rate sustained in B" in c["app/json/svc/sustainable_rate"].line()
    assert c["app/peer/status"].verdict == "worse"
    assert c["app/peer/status"].line() == "WORSE   app/peer/status: failed in B: peer: exited with status 1"


def test_mismatches_list_every_difference():
    got = compare.mismatches(make_doc(), make_doc(2, version="1.1.0", repeat=5, connections=16))
    assert got == ["load engine version: '1.0.0' vs '1.1.0'", "settings repeat: 3 vs 5",
                   "app/json connections: 50 vs 16"]
    assert compare.mismatches(make_doc(), make_doc(2)) == []


def _write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_compare_cli(tmp_path):
    results.validate(make_doc())  # the documents of these tests are what the bench writes
    a = _write(tmp_path, "a.json", make_doc())
    b = _write(tmp_path, "b.json", make_doc(2, scale=0.70))
    out = tmp_path / "cmp.json"
    r = run_cli(["compare", a, b, "--fail-on-slower", "--json", str(out)], timeout=60)
    assert r.returncode == 1, r.stderr
    assert re.search(r"^WORSE   app/json/svc/max_rps: [\d,]+ → [\d,]+ req/s, B/A 0\.[67]\d\d \[0\.\d+, 0\.\d+\]$",
                     r.stdout, re.M), r.stdout
    assert "app/json/peer/max_rps" not in r.stdout  # the same: listed with --all only
    got = json.loads(out.read_text())
    assert got["counts"]["worse"] >= 2 and got["forced"] is False and got["min_change"] == 0.05
    assert {c["key"] for c in got["changes"]} >= {"app/json/peer/max_rps", "app/json/svc/errors"}
    r = run_cli(["compare", a, a, "--all", "--min-change", "10%"], timeout=60)
    assert r.returncode == 0 and " 0 worse, 0 better" in r.stdout and "SAME    app/json/peer/max_rps" in r.stdout


def test_compare_cli_refuses_runs_measured_differently(tmp_path):
    a = _write(tmp_path, "a.json", make_doc())
    b = _write(tmp_path, "b.json", make_doc(2, version="2.0.0", connections=16))
    r = run_cli(["compare", a, b], timeout=60)
    assert r.returncode == 2 and not r.stdout
    assert "not measured the same way" in r.stderr
    assert "load engine version: '1.0.0' vs '2.0.0'" in r.stderr and "app/json connections: 50 vs 16" in r.stderr
    r = run_cli(["compare", a, b, "--force"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert "WARNING: A and B were not measured the same way" in r.stdout and "vs '2.0.0'" in r.stdout


def test_compare_bad_input(tmp_path):
    r = run_cli(["compare", str(tmp_path / "missing.json"), str(tmp_path / "missing.json")], timeout=60)
    assert r.returncode == 2 and "cannot read" in r.stderr and "missing.json" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": results.SCHEMA_ID, "scenarios": []}))
    r = run_cli(["compare", str(bad), str(bad)], timeout=60)
    assert r.returncode == 2 and "results do not match the schema" in r.stderr
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    r = run_cli(["compare", str(other), str(bad)], timeout=60)
    assert r.returncode == 2 and "is not a perfkit results file" in r.stderr
    r = run_cli(["compare", str(bad), str(bad), "--min-change", "2"], timeout=60)
    assert r.returncode == 2 and "--min-change" in r.stderr
