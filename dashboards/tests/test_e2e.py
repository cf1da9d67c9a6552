"""End to end: a real Prometheus with dashboards/prometheus (config and rules), every service, and a short
perfkit-load run against each (see e2e_stack.py); then every panel's PromQL (variables substituted) must
return data through Prometheus's HTTP API.
"""
from __future__ import annotations

import time

from dashlib import has_finite_value, load_dashboards, prom_api, query_panels, substitute
from e2e_stack import BYO, stack  # noqa: F401  (stack is a pytest fixture)


def test_every_target_was_scraped(stack):
    data = prom_api(stack["base"], "/api/v1/query_range",
                    {"query": "max_over_time(up[1m])", "start": stack["start"], "end": stack["end"], "step": "1"})
    jobs = {r["metric"]["job"] for r in data["result"] if any(v == "1" for _, v in r["values"])}
    assert {"aquilia_app", "rpc_app", "aurora_app", "perfkit_load", "prometheus", BYO} <= jobs, jobs


def test_load_metrics_carry_the_service_label(stack):
    data = prom_api(stack["base"], "/api/v1/query",
                    {"query": "count by (service) (last_over_time(perfkit_load_target_rate[5m]))", "time": stack["end"]})
    assert {r["metric"].get("service") for r in data["result"]} == {"aquilia_app", "rpc_app", "aurora_app"}


def test_a_target_file_names_the_service_of_a_target_on_an_ephemeral_port(stack):
    """The load engines listen on ports the OS chose; the only thing that ties each to its service is the target
    file written for it (perfkit.promsd, as the bench writes them): the scrape config maps no port to anything."""
    data = prom_api(stack["base"], "/api/v1/query",
                    {"query": "count by (instance, job, service) (last_over_time(perfkit_load_target_rate[5m]))",
                     "time": stack["end"]})
    got = {r["metric"]["instance"]: (r["metric"]["job"], r["metric"].get("service")) for r in data["result"]}
    want = {f"127.0.0.1:{port}": ("perfkit_load", svc) for svc, port in stack["load_ports"].items()}
    assert got == want
    assert not {9464} & set(stack["load_ports"].values())
    # the services' own series keep the service label they expose (honor_labels); `up` gets the file's
    up = prom_api(stack["base"], "/api/v1/query", {"query": "max_over_time(up[5m])", "time": stack["end"]})["result"]
    labels = {r["metric"]["instance"]: (r["metric"]["job"], r["metric"].get("service")) for r in up}
    for svc, port in {**stack["ports"], BYO: stack["byo_port"]}.items():
        assert labels[f"127.0.0.1:{port}"] == (svc, svc), labels


def test_overview_shows_a_service_no_dashboard_names(stack):
    """e2e_byo only exposes the standard server histogram: the overview's service panels show it all the same."""
    dash = next(d for d in load_dashboards().values() if d["uid"] == "perfmono-overview")
    assert BYO not in str(dash)
    shown = []
    for panel in query_panels(dash):
        for t in panel["targets"]:
            expr = substitute(t["expr"], {"datasource": "perfmono-prometheus"})
            data = prom_api(stack["base"], "/api/v1/query_range",
                            {"query": expr, "start": stack["start"], "end": stack["end"], "step": "1"})
            if any(r["metric"].get("service") == BYO and has_finite_value({"result": [r]}) for r in data["result"]):
                shown.append(panel["title"])
    for title in ("Throughput", "Error ratio", "p99: server-side vs load engine (corrected)",
                  "Availability SLO: burn rate over 1h and 6h", "Latency SLO: burn rate over 1h and 6h"):
        assert title in shown, (title, shown)


def test_every_panel_returns_data(stack):
    empty, checked = [], 0
    for name, dash in sorted(load_dashboards().items()):
        values = {v["name"]: ".+" for v in dash["templating"]["list"]}
        values["datasource"] = "perfmono-prometheus"
        for panel in query_panels(dash):
            for t in panel["targets"]:
                expr = substitute(t["expr"], values)
                data = prom_api(stack["base"], "/api/v1/query_range",
                                {"query": expr, "start": stack["start"], "end": stack["end"], "step": "1"})
                checked += 1
                if not has_finite_value(data):
                    # every query of a panel must answer (a panel with two series kinds: at least one each)
                    empty.append(f"{dash['uid']} / {panel['title']} / {t['refId']}: {expr}")
    assert checked > 40
    assert not empty, "queries with no data:\n" + "\n".join(empty)


def test_rule_evaluation_has_no_errors(stack):
    groups = prom_api(stack["base"], "/api/v1/rules", {})["groups"]
    assert {g["name"] for g in groups} >= {"perfmono_http", "perfmono_slo", "perfmono_rpc", "perfmono_hotpath",
                                           "perfmono_load", "perfmono_alerts"}
    for g in groups:
        for r in g["rules"]:
            assert r["health"] == "ok", (r["name"], r.get("lastError"))


def test_no_alert_condition_holds_on_a_healthy_run(stack):
    """Every alert has a `for:` of a minute or more and the stack lives seconds, so no alert can reach
    "firing" here: what is checked is each alert's condition itself, evaluated over the run (any sample
    true) and the alerts Prometheus already holds as pending."""
    base = stack["base"]
    rules = [r for g in prom_api(base, "/api/v1/rules", {})["groups"] for r in g["rules"] if r["type"] == "alerting"]
    assert {r["name"] for r in rules} >= {"HttpAvailabilityFastBurn", "HttpAvailabilitySlowBurn", "HttpLatencyFastBurn",
                                          "HttpLatencySlowBurn", "RpcErrorRatioHigh", "TargetDown"}
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


def test_a_withdrawn_target_file_drops_the_target(stack):
    """What the bench does when a system or a load run stops: the file goes, and so does the target (it is not
    left down, which TargetDown would report). Runs last: it changes the stack."""
    base = stack["base"]

    def jobs():
        return {t["labels"]["job"] for t in prom_api(base, "/api/v1/targets", {"state": "active"})["activeTargets"]}

    assert "e2e_withdrawn" in jobs()
    stack["files"]["withdraw"].remove()
    deadline = time.monotonic() + 30  # discovery hands updates over every 5 s
    while "e2e_withdrawn" in jobs():
        assert time.monotonic() < deadline, "the target outlived its file by 30 s"
        time.sleep(0.2)
    assert "prometheus" in jobs()
