"""The run index: one line per bench run with its headline, and perfkit trend's table and plot over it."""

import json

import pytest
from conftest import run_cli
from noisy_doc import make_doc

from perfkit import history


def _run(results_dir, name, created, commit, **kw):
    doc = make_doc(**kw)
    doc.update(created=created, git_commit=commit)
    out = results_dir / name
    out.mkdir(parents=True)
    return doc, out


def _index_of_two_runs(tmp_path):
    results = tmp_path / "results"
    first, out1 = _run(results, "20261201-100000", "2026-12-01T10:00:00Z", "aaaa1111")
    second, out2 = _run(results, "20261202-100000", "2026-12-02T10:00:00Z", "bbbb2222", seed=2, scale=0.7,
                        errors=5)
    assert history.append(first, str(out1)) == str(results / "index.jsonl")  # beside the run folders
    history.append(second, str(out2))
    return results / "index.jsonl"


def test_append_writes_one_line_per_run_with_its_headline(tmp_path):
    index = _index_of_two_runs(tmp_path)
    lines = index.read_text().splitlines()
    assert len(lines) == 2
    e = json.loads(lines[0])
    assert e["created"] == "2026-12-01T10:00:00Z" and e["git_commit"] == "aaaa1111" and e["suite"] == "quick"
    assert e["out"] == "20261201-100000" and e["cpu_model"] == "Test CPU" and e["engine"] == "1.0.0"
    (h,) = e["headlines"]
    assert (h["scenario"], h["workload"], h["service"], h["best_peer"]) == ("app", "json", "svc", "peer")
    assert h["sustainable"] == {"service": 9000.0, "best_peer": 4200.0}
    assert h["sustainable_ratio"] == pytest.approx(9000 / 4200)
    assert h["cpu_ratio"] == pytest.approx(20 / 45, rel=0.1)  # service ÷ peer CPU per request
    assert h["max_ratio"] == pytest.approx(2.0, rel=0.1)
    assert json.loads(lines[1])["headlines"][0]["service_errors"] == 5


def test_an_index_path_given_and_the_out_folder_relative_to_it(tmp_path):
    doc, out = _run(tmp_path / "elsewhere", "run", "2026-12-01T10:00:00Z", "c")
    index = tmp_path / "idx" / "runs.jsonl"
    history.append(doc, str(out), str(index))
    assert json.loads(index.read_text())["out"] == "../elsewhere/run"


def test_trend_rows_table_and_plot(tmp_path):
    trend = history.rows(history.read(str(_index_of_two_runs(tmp_path))), "app")
    assert [r["git_commit"] for r in trend] == ["aaaa1111", "bbbb2222"]
    table = history.table(trend)
    head, first, second = table.splitlines()
    assert head.split()[:6] == ["created", "commit", "suite", "workload", "service", "best"]
    assert first.split()[1:6] == ["aaaa1111", "quick", "json", "svc", "peer"]
    assert "2.14" in first and "1.50" in second  # sustainable: 9000/4200, then 6300/4200
    assert second.endswith("5")  # the service's failed answers
    html = history.plot_html(trend, "app")
    assert "plotly" in html.lower() and '<script src="http' not in html  # plotly.js inlined, no CDN
    assert "app/json" not in html and "json: sustainable" in html
    with pytest.raises(history.HistoryError, match=r"no run of nosuch in the index \(it has: app/json\)"):
        history.rows(history.read(str(tmp_path / "results" / "index.jsonl")), "nosuch")


def test_trend_cli(tmp_path):
    index = _index_of_two_runs(tmp_path)
    r = run_cli(["trend", "app", "--index", str(index)], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "perfkit trend: app, 2 run(s)" in r.stdout and "bbbb2222" in r.stdout
    plot = tmp_path / "results" / "trend-app.html"
    assert plot.exists() and f"plot: {plot}" in r.stdout
    r = run_cli(["trend", "app", "--index", str(tmp_path / "none.jsonl")], timeout=60)
    assert r.returncode == 2 and "cannot read" in r.stderr
    index.write_text(index.read_text() + "{not json\n")
    r = run_cli(["trend", "app", "--index", str(index)], timeout=60)
    assert r.returncode == 2 and "index.jsonl:3: not JSON" in r.stderr
