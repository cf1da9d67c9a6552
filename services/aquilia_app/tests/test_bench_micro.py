"""The micro-benchmark runs end to end (tiny counts) and reports every hot path with its peer and naive
times: a bench that silently loses a row or a comparison would make the README's table unverifiable."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

import pytest  # noqa: E402

import bench_micro  # noqa: E402

# the peers the rows compare with (deps of the Bazel target; a plain venv may lack them)
for _peer in ("starlette", "fastapi", "pypika"):
    pytest.importorskip(_peer)

HOT_PATHS = ("route match: hit dynamic", "route match: hit static", "route match: miss", "request scope + resolve",
             "Response.json", "middleware chain call", "Q chain of 4 ops", "Jinja2 render of /html",
             "request /json via __rsgi__, metrics on")


def test_every_hot_path_has_its_peer_and_naive_timing(tmp_path, capsys):
    out = tmp_path / "micro.json"
    assert bench_micro.main(["-n", "20", "--repeat", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    for name in HOT_PATHS:
        row = next(r for r in rows if r["hotpath"].startswith(name))
        assert row["ours_ns"] > 0 and row["peer_ns"] > 0 and row["naive_ns"] > 0, row
    assert "metrics off" in capsys.readouterr().out


def test_instrumentation_bench_times_apps_that_record_every_request():
    on, off, direct = bench_micro.instrumentation_apps()
    rows = bench_micro.bench_instrumentation(7, 2, (on, off, direct))
    assert len(rows) == 1 and rows[0][0].startswith("request /json")
    labels = {"service": "aquilia_app", "route": "/json", "method": "GET", "status_class": "2xx"}
    for app in (on, direct):  # 7 requests x 2 rounds each, flushed at shutdown
        assert app.metrics.registry.prometheus.get_sample_value("http_server_request_duration_seconds_count", labels) == 14
    assert off.metrics is None
