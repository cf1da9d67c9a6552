"""report.md and report.html from a results document (no bench run): the headline (sustainable req/s at the SLO
and CPU per request against the best peer), honest cells (rates not held, failed answers, a load-generator-bound
max), client scenarios and results written before the v2 fields, and an HTML page that needs no network."""

import copy
import re

from report_doc import results_document, system

from perfkit import report_html, report_md, results


def _row(md: str, start: str) -> list[str]:
    line = next(ln for ln in md.splitlines() if ln.startswith(start))
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def test_the_test_document_is_a_valid_results_document():
    results.validate(results_document())


def test_summary_headline_is_sustainable_rate_and_cpu_per_request():
    doc = results_document()
    (kind, server), (ckind, client) = report_md.summary_tables(doc)
    assert (kind, ckind) == ("server", "client")
    assert server.head[2:8] == ["service sustainable req/s", "best peer (sustainable req/s)", "service ÷ best peer",
                                "service CPU µs/req", "best peer CPU µs/req",
                                "CPU/req service ÷ best peer (lower is better)"]
    assert server.head[9] == "closed-loop max: service (÷ best peer)"
    assert server.rows == [["webapp / json", "10.00 ms", "16,000", "peer-a (12,000)", "1.33×", "42.5", "57.0",
                            "0.75×", "1/3", "20,500 (1.28×)", "–"]]
    md = report_md.render(doc)
    assert "| webapp / json | 10.00 ms | 16,000 | peer-a (12,000) | 1.33× |" in md


def test_best_peer_is_the_highest_sustainable_rate_not_the_highest_max():
    doc = results_document()
    res = doc["scenarios"][0]["workloads"][0]["results"]
    # orig: a lower closed-loop max than peer-a's but a higher sustainable rate
    res["orig"].update(errors=0, failures={}, load_generator_bound=False)
    res["orig"]["sustainable"]["rate"] = 14000.0
    row = report_md.summary_rows(doc)[0]
    assert row["best_peer"] == "orig"
    assert row["sustainable_vs_best_peer"] == 16000 / 14000
    assert row["cpu_vs_best_peer"] == 42.5 / 90.0
    assert row["vs_best_peer"] == 20500 / 12500  # the closed-loop ratio, against the same best peer


def test_floor_ratio_is_of_sustainable_rates_else_of_closed_loop_maxes():
    doc = results_document()
    sc = doc["scenarios"][0]
    sc["systems"].append(system("raw", "floor", 20, 10.0))
    raw = sc["workloads"][0]["results"]["raw"] = copy.deepcopy(sc["workloads"][0]["results"]["peer-a"])
    raw["sustainable"]["rate"] = 20000.0
    row = report_md.summary_tables(doc)[0][1].rows[0]
    assert (row[8], row[10]) == ("2/4", "0.80× (raw, sustainable)")
    raw["sustainable"]["rate"] = None
    assert report_md.summary_tables(doc)[0][1].rows[0][10] == "1.28× (raw, closed loop)"


def test_ranking_by_sustainable_rate_then_cpu_per_request_none_last():
    doc = results_document()
    sc = doc["scenarios"][0]
    w = sc["workloads"][0]
    assert [s["name"] for s, _ in report_md.ranked(sc, w)] == ["svc", "peer-a", "orig"]
    # the same sustainable rate: the lower CPU per request ranks first, though its max is lower
    w["results"]["peer-a"]["sustainable"]["rate"] = 16000.0
    w["results"]["peer-a"]["cpu_per_request_us"] = {"median": 30.0, "min": 29.0, "max": 31.0, "spread": 0.07,
                                                    "values": [29.0, 30.0, 31.0]}
    assert [s["name"] for s, _ in report_md.ranked(sc, w)] == ["peer-a", "svc", "orig"]
    t = report_md.ranking_table(sc, w)
    assert t.head[4:8] == ["sustainable req/s at p99 ≤ 10.00 ms", "CPU µs/req at 6,000 req/s",
                           "closed-loop max req/s", "errors"]
    assert [r[1] for r in t.rows] == ["peer-a", "svc", "orig"] and t.strong == {1}
    assert t.rows[2][4] == "none"  # orig held no rate within the SLO


def test_rates_not_held_read_not_held_with_the_achieved_rate():
    md = report_md.render(results_document())
    assert _row(md, "| orig | ") == ["orig", "900 µs / 12.00 ms ⚠ 40 failed", "not held (achieved 8,123 req/s)",
                                     "not held (achieved 8,400 req/s)"]
    assert _row(md, "| **svc** | 280 µs") == ["**svc**", "280 µs / 850 µs", "320 µs / 1.20 ms", "400 µs / 1.90 ms"]


def test_failed_answers_are_flagged_with_their_kinds():
    md = report_md.render(results_document())
    row = _row(md, "| 3 | orig |")
    assert row[7] == "⚠ 1,234 failed (timeout 1,000, 5xx 200, read_error 34)"
    assert "- ⚠ orig: 1,234 failed answers over its runs (timeout 1,000, 5xx 200, read_error 34)" in md
    assert "orig: 6,000 → p99 12.00 ms ✗ (p99 over the SLO, 40 failed)" in md
    assert _row(md, "| 1 | **svc** |")[7] == "0"


def test_load_generator_bound_max_says_so():
    md = report_md.render(results_document())
    assert _row(md, "| 3 | orig |")[6] == "12,500 ±4% (load-generator bound)"
    assert _row(md, "| 1 | **svc** |")[6] == "20,500 ±2%"


def test_client_scenario_still_renders():
    md = report_md.render(results_document())
    assert "Client scenarios (one connection, back to back):" in md
    assert _row(md, "| httpclient / ping |") == ["httpclient / ping", "4,200", "2/3", "requests (2,100)", "2.00×",
                                                 "0.82× (urllib3)"]
    assert "### httpclient / ping — GET /ping against hyper-floor (one connection, back to back)" in md
    assert _row(md, "| 3 | requests |")[9] == "⚠ 3 failed"


def test_results_without_the_v2_fields_still_render():
    """results.json written before the sustainable rate existed: `perfkit report` re-renders it."""
    doc = results_document()
    w = doc["scenarios"][0]["workloads"][0]
    for key in ("slo_p99_us", "cpu_rate"):
        del w[key]
    for r in w["results"].values():
        for key in ("sustainable", "cpu_per_request_us", "failures", "load_generator_bound"):
            del r[key]
        for lv in r["levels"]:
            for key in ("held", "cpu_per_request_us", "engine_saturated", "timeline"):
                del lv[key]
    md = report_md.render(doc)
    assert "not held" not in md and "| 1 | **svc** |" in md
    assert _row(md, "| webapp / json |")[2] == "–"  # no sustainable rate to show
    assert _row(md, "| orig | ")[2] == "30.00 ms / 900.00 ms ⚠ 600 failed"  # no `held`: latencies as measured
    html = report_html.render(doc)
    assert 'id="chart-webapp-json-spectrum"' in html and 'id="chart-webapp-json-throughput"' in html
    assert 'id="chart-webapp-json-timeline"' not in html and 'id="chart-webapp-json-cpu-per-request"' not in html


def test_html_is_self_contained_with_one_plotly_bundle():
    from plotly.offline import get_plotlyjs

    html = report_html.render(results_document())
    assert "<img" not in html
    assert html.count(get_plotlyjs()[:200]) == 1
    assert html.count("Plotly.newPlot(") == 7
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert not re.search(r"""<(?:script|link|iframe)[^>]*(?:src|href)=["']?https?://""", html)
    ids = re.findall(r'<div id="([^"]+)" class="perfkit-chart">', html)
    assert ids == ["chart-webapp-json-latency-vs-rate", "chart-webapp-json-spectrum", "chart-webapp-json-timeline",
                   "chart-webapp-json-cpu-per-request", "chart-webapp-json-throughput", "chart-webapp-json-hot-paths",
                   "chart-httpclient-ping-throughput"]
    # the tables come from the results, not from parsing report.md
    assert "<td>not held (achieved 8,123 req/s)</td>" in html
    assert '<tr class="service"><td>1</td><td class="t name">svc</td><td class="t">service</td>' in html


def test_html_escapes_names_in_tables_and_charts():
    doc = results_document()
    sc = doc["scenarios"][1]
    sc["description"] = "clients <script>alert(1)</script>"
    sc["systems"][1]["name"] = "req</script><b>x"
    w = sc["workloads"][0]
    w["results"]["req</script><b>x"] = w["results"].pop("requests")
    html = report_html.render(doc)
    assert "clients &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "req&lt;/script&gt;&lt;b&gt;x" in html  # the table cell
    assert "req</script>" not in html  # nor raw in the chart's JSON


def test_md_and_html_show_the_same_cells():
    doc = copy.deepcopy(results_document())
    html = report_html.render(doc)
    for t in [t for _, t in report_md.summary_tables(doc)] + [report_md.ranking_table(sc, w) for sc in doc["scenarios"]
                                                              for w in sc["workloads"]]:
        for row in t.rows:
            for cell in row:
                assert f">{cell.replace('&', '&amp;')}</td>" in html, cell
