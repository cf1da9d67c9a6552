"""compare: a planted 30% regression is flagged, a 2% change is not; bad input gets a clear error."""

import copy
import json

from conftest import run_cli

from perfkit import compare, results, stats


def _result(rps_values, p99_values):
    return {
        "max_rps": stats.summary(rps_values), "errors": 0, "requests": 1000, "metrics": {},
        "levels": [{
            "fraction": 0.9, "target_rate": 900.0, "achieved_rate": stats.summary([900.0, 899.0, 901.0]),
            "errors": 0,
            "latency_us": {p: stats.summary(p99_values if p == "p99" else [100.0, 101.0, 99.0])
                           for p in ("p50", "p90", "p99", "p99_9")},
            "uncorrected_latency_us": {"p50": stats.summary([90.0])}, "spectrum": [[0.5, 100.0], [0.99, 300.0]],
        }],
    }


def _doc(scale_a=1.0, scale_b=1.0, p99_scale_b=1.0):
    doc = results.new_document("quick", {"duration_s": 2.0, "probe_s": 2.0, "warmup_s": 1.0, "repeat": 3,
                                         "levels": [0.5, 0.75, 0.9]},
                               {"systems": "0", "load": "1"}, {"path": "perfkit-load", "version": "test"}, [])
    system = {"role": "peer", "version": "1", "status": "ok", "error": "", "log_tail": "",
              "peak_rss_bytes": 1, "cpu_seconds": 1.0}
    doc["scenarios"].append({
        "name": "svc", "kind": "server", "status": "ok",
        "systems": [dict(system, name="a", role="service"), dict(system, name="b")],
        "workloads": [{"name": "json", "mode": "http", "method": "GET", "path": "/json", "connections": 16,
                       "rates": [500.0, 750.0, 900.0], "results": {
                           # spreads of ~2% over the repeats
                           "a": _result([1000 * scale_a, 1010 * scale_a, 990 * scale_a], [300.0, 306.0, 294.0]),
                           "b": _result([2000 * scale_b, 2020 * scale_b, 1980 * scale_b],
                                        [300.0 * p99_scale_b, 306.0 * p99_scale_b, 294.0 * p99_scale_b]),
                       }}],
    })
    results.validate(doc)
    return doc


def test_planted_30_percent_regression_is_flagged_2_percent_is_not():
    base = _doc()
    new = _doc(scale_a=0.70, scale_b=0.98)
    changes = {c.key: c for c in compare.compare(base, new)}
    a = changes["svc/json/a/max_rps"]
    b = changes["svc/json/b/max_rps"]
    assert a.verdict == "slower" and abs(a.change + 0.30) < 1e-9
    assert b.verdict == "same"
    assert changes["svc/json/a/90%/p99"].verdict == "same"


def test_latency_regression_and_improvement_directions():
    base = _doc()
    worse = {c.key: c for c in compare.compare(base, _doc(p99_scale_b=1.3))}
    assert worse["svc/json/b/90%/p99"].verdict == "slower"  # latency up = slower
    better = {c.key: c for c in compare.compare(base, _doc(scale_a=1.3))}
    assert better["svc/json/a/max_rps"].verdict == "faster"


def test_a_noisy_baseline_raises_the_threshold():
    base = _doc()
    noisy = copy.deepcopy(base)
    r = noisy["scenarios"][0]["workloads"][0]["results"]["a"]
    r["max_rps"] = stats.summary([600.0, 1000.0, 1400.0])  # 80% spread
    new = _doc(scale_a=0.75)
    c = {c.key: c for c in compare.compare(noisy, new)}["svc/json/a/max_rps"]
    assert c.verdict == "same" and c.threshold >= 0.8


def test_compare_cli(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b" / "results.json"
    b.parent.mkdir()
    a.write_text(json.dumps(_doc()))
    b.write_text(json.dumps(_doc(scale_a=0.70, scale_b=0.98)))
    r = run_cli(["compare", str(a), str(b.parent), "--fail-on-slower"], timeout=60)
    assert r.returncode == 1, r.stderr
    assert "SLOWER  svc/json/a/max_rps: 1,000.0 -> 700.0 (-30.0%" in r.stdout
    assert "svc/json/b/max_rps" not in r.stdout
    assert "1 slower" in r.stdout
    r = run_cli(["compare", str(a), str(a)], timeout=60)
    assert r.returncode == 0 and "0 faster, 0 slower" in r.stdout


def test_compare_bad_input(tmp_path):
    r = run_cli(["compare", str(tmp_path / "missing.json"), str(tmp_path / "missing.json")], timeout=60)
    assert r.returncode == 2 and "cannot read" in r.stderr and "missing.json" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "perfkit-bench/results/v1", "scenarios": []}')
    r = run_cli(["compare", str(bad), str(bad)], timeout=60)
    assert r.returncode == 2 and "results do not match the schema" in r.stderr
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    r = run_cli(["compare", str(other), str(bad)], timeout=60)
    assert r.returncode == 2 and "is not a perfkit results file" in r.stderr
