"""End to end: a real Prometheus with dashboards/prometheus (config and rules), every service, and a short
perfkit-load run against each (see e2e_stack.py); then every panel's PromQL (variables substituted) must
return data through Prometheus's HTTP API.
"""
from __future__ import annotations

from dashlib import has_finite_value, http_get, load_dashboards, prom_api, query_panels, substitute
from e2e_stack import KNOWN_GAPS, stack  # noqa: F401  (stack is a pytest fixture)


def test_every_target_was_scraped(stack):
    data = prom_api(stack["base"], "/api/v1/query_range",
                    {"query": "max_over_time(up[1m])", "start": stack["start"], "end": stack["end"], "step": "1"})
    jobs = {r["metric"]["job"] for r in data["result"] if any(v == "1" for _, v in r["values"])}
    assert {"aquilia_app", "rpc_app", "aurora_app", "perfkit_load", "prometheus"} <= jobs, jobs


def test_load_metrics_carry_the_service_label(stack):
    data = prom_api(stack["base"], "/api/v1/query",
                    {"query": "count by (service) (last_over_time(perfkit_load_target_rate[5m]))", "time": stack["end"]})
    assert {r["metric"].get("service") for r in data["result"]} == {"aquilia_app", "rpc_app", "aurora_app"}


def test_every_panel_returns_data(stack):
    empty, checked = [], 0
    for name, dash in sorted(load_dashboards().items()):
        values = {v["name"]: ".+" for v in dash["templating"]["list"]}
        values["datasource"] = "perfmono-prometheus"
        for panel in query_panels(dash):
            got = False
            for t in panel["targets"]:
                expr = substitute(t["expr"], values)
                data = prom_api(stack["base"], "/api/v1/query_range",
                                {"query": expr, "start": stack["start"], "end": stack["end"], "step": "1"})
                checked += 1
                if has_finite_value(data):
                    got = True
                elif (dash["uid"], panel["title"]) not in KNOWN_GAPS:
                    # every query of a panel must answer (a panel with two series kinds: at least one each)
                    empty.append(f"{dash['uid']} / {panel['title']} / {t['refId']}: {expr}")
            if not got and (dash["uid"], panel["title"]) in KNOWN_GAPS:
                svc, metric = KNOWN_GAPS[(dash["uid"], panel["title"])]
                exposition = http_get(f"http://127.0.0.1:{stack['ports'][svc]}/metrics").decode()
                assert metric not in exposition, (
                    f"{svc} now exports {metric} but {dash['uid']} / {panel['title']} is empty: fix the query")
    assert checked > 40
    assert not empty, "queries with no data:\n" + "\n".join(empty)


def test_rule_evaluation_has_no_errors(stack):
    groups = prom_api(stack["base"], "/api/v1/rules", {})["groups"]
    assert {g["name"] for g in groups} >= {"perfmono_http", "perfmono_rpc", "perfmono_hotpath", "perfmono_load",
                                           "perfmono_alerts"}
    for g in groups:
        for r in g["rules"]:
            assert r["health"] == "ok", (r["name"], r.get("lastError"))


def test_no_alert_condition_holds_on_a_healthy_run(stack):
    """Every alert has a `for:` of a minute or more and the stack lives seconds, so no alert can reach
    "firing" here: what is checked is each alert's condition itself, evaluated over the run (any sample
    true) and the alerts Prometheus already holds as pending."""
    base = stack["base"]
    rules = [r for g in prom_api(base, "/api/v1/rules", {})["groups"] for r in g["rules"] if r["type"] == "alerting"]
    assert len(rules) >= 4
    span = max(1, int(stack["end"] - stack["start"]))
    held = []
    for rule in rules:
        expr = f"max_over_time(({rule['query']})[{span}s:1s])"
        for row in prom_api(base, "/api/v1/query", {"query": expr, "time": stack["end"]})["result"]:
            held.append((rule["name"], row["metric"], row["value"][1]))
    assert held == [], f"alert conditions true during a healthy run: {held}"
    pending = prom_api(base, "/api/v1/alerts", {})["alerts"]
    assert pending == [], pending


def test_previews_render(stack, tmp_path):
    """The preview renderer (grafana/preview.py) draws every dashboard from this run's data.
    PERFMONO_PREVIEW_DIR=<dir> keeps the PNGs (that is how the README's previews are made)."""
    import os
    import sys

    from dashlib import GRAFANA_DIR

    sys.path.insert(0, str(GRAFANA_DIR))
    import preview

    out = os.environ.get("PERFMONO_PREVIEW_DIR") or str(tmp_path)
    for name, dash in sorted(load_dashboards().items()):
        values = {v["name"]: ".+" for v in dash["templating"]["list"]}
        path = os.path.join(out, name[:-5] + ".png")
        preview.render_dashboard(dash, stack["base"], stack["start"], stack["end"], path, values)
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
