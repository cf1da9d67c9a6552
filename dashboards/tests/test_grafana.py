"""Manual test (tag `manual`): the real Grafana server built by tools/build_grafana.sh, provisioned from
dashboards/grafana, next to the end-to-end Prometheus stack of e2e_stack.py.

    tools/build_grafana.sh      # once, ~9 min
    bazel test //dashboards:grafana_test --test_env=PERFMONO_GRAFANA_BIN=$HOME/.cache/perfmono/grafana/bin/grafana

Checks: /api/search finds every dashboard, the log shows no provisioning error, and every panel's
query run through Grafana's /api/ds/query (Grafana's Prometheus datasource, the provisioned uid)
returns data.
"""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dashlib import DASHBOARDS_DIR, GRAFANA_DIR, free_port, load_dashboards, query_panels, stop, substitute, wait_http
from e2e_stack import KNOWN_GAPS, stack  # noqa: F401  (stack is a pytest fixture)

AUTH = "Basic " + base64.b64encode(b"admin:admin").decode()


def grafana_bin() -> str:
    candidates = [os.environ.get("PERFMONO_GRAFANA_BIN"), os.environ.get("GRAFANA_BIN"),
                  os.path.join(os.environ.get("PERFMONO_GRAFANA_DIR") or
                               os.path.join(os.path.expanduser("~"), ".cache", "perfmono", "grafana"), "bin", "grafana")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise AssertionError("no Grafana server: build one with tools/build_grafana.sh and pass "
                         "--test_env=PERFMONO_GRAFANA_BIN=<its bin/grafana>")


def api(base: str, path: str, body: dict | None = None) -> dict | list:
    req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": AUTH, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{path}: HTTP {exc.code}: {exc.read()[:800]!r}") from None


@pytest.fixture(scope="module")
def grafana(stack, tmp_path_factory):  # noqa: F811
    exe = grafana_bin()
    tmp = tmp_path_factory.mktemp("grafana")
    home = Path(exe).resolve().parent.parent
    port = free_port()
    env = dict(os.environ,
               PROMETHEUS_URL=stack["base"], PERFMONO_DASHBOARDS_DIR=str(DASHBOARDS_DIR),
               GF_PATHS_PROVISIONING=str(GRAFANA_DIR / "provisioning"), GF_PATHS_DATA=str(tmp / "data"),
               GF_PATHS_LOGS=str(tmp / "logs"), GF_PATHS_PLUGINS=str(tmp / "plugins"),
               GF_SERVER_HTTP_ADDR="127.0.0.1", GF_SERVER_HTTP_PORT=str(port),
               GF_ANALYTICS_REPORTING_ENABLED="false", GF_ANALYTICS_CHECK_FOR_UPDATES="false",
               GF_LOG_MODE="console", GF_LOG_LEVEL="info")
    cmd = [exe] + (["server"] if Path(exe).name == "grafana" else []) + ["--homepath", str(home)]
    log = tmp / "grafana.log"
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/api/health", 90, proc)
        base = f"http://127.0.0.1:{port}"
        expected = {d["uid"] for d in load_dashboards().values()}
        deadline = time.monotonic() + 30  # the file provider's first scan
        while time.monotonic() < deadline:
            found = {h["uid"] for h in api(base, "/api/search?type=dash-db")}
            if expected <= found:
                break
            time.sleep(0.5)
        yield {"base": base, "log": log, "stack": stack}
    finally:
        stop(proc)


def test_search_finds_every_dashboard(grafana):
    hits = api(grafana["base"], "/api/search?type=dash-db")
    want = {d["uid"]: d["title"] for d in load_dashboards().values()}
    got = {h["uid"]: h["title"] for h in hits}
    assert want.items() <= got.items(), (want, got)
    for uid in want:
        doc = api(grafana["base"], f"/api/dashboards/uid/{uid}")
        assert doc["meta"]["provisioned"] is True
        assert doc["dashboard"]["uid"] == uid


def test_datasource_is_provisioned_with_the_fixed_uid(grafana):
    ds = api(grafana["base"], "/api/datasources/uid/perfmono-prometheus")
    assert ds["type"] == "prometheus" and ds["url"] == grafana["stack"]["base"]


def test_no_provisioning_error_in_the_log(grafana):
    text = grafana["log"].read_text(errors="replace")
    bad = [line for line in text.splitlines()
           if re.search(r"level=(error|eror)|lvl=eror", line) and re.search(r"provision|dashboard|datasource", line, re.I)]
    assert not bad, "\n".join(bad[:20])


def test_every_panel_query_returns_data_through_grafana(grafana):
    st = grafana["stack"]
    empty, checked = [], 0
    for name, dash in sorted(load_dashboards().items()):
        values = {v["name"]: ".+" for v in dash["templating"]["list"]}
        values.update({"datasource": "perfmono-prometheus", "__rate_interval": "$__rate_interval",
                       "__interval": "$__interval", "__range": "$__range"})
        for panel in query_panels(dash):
            if (dash["uid"], panel["title"]) in KNOWN_GAPS:
                continue
            for t in panel["targets"]:
                q = {"refId": t["refId"], "expr": substitute(t["expr"], values), "range": True,
                     "datasource": {"type": "prometheus", "uid": "perfmono-prometheus"},
                     "intervalMs": 1000, "maxDataPoints": 600}
                if t.get("format"):
                    q["format"] = t["format"]
                resp = api(grafana["base"], "/api/ds/query",
                           {"from": str(int(st["start"] * 1000)), "to": str(int(st["end"] * 1000)), "queries": [q]})
                checked += 1
                res = resp["results"][t["refId"]]
                assert not res.get("error"), (dash["uid"], panel["title"], res.get("error"))
                values_seen = [v for f in res.get("frames", []) for col in f["data"]["values"][1:] for v in col
                               if isinstance(v, (int, float))]
                if not values_seen:
                    empty.append(f"{dash['uid']} / {panel['title']} / {t['refId']}: {q['expr']}")
    assert checked > 40
    assert not empty, "queries with no data through Grafana:\n" + "\n".join(empty)
