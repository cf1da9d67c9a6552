"""promtool check config / check rules / test rules on dashboards/prometheus."""
from __future__ import annotations

import subprocess

import pytest

from dashlib import PROM_DIR, promtool

RULE_FILES = sorted((PROM_DIR / "rules").glob("*.yml"))
TEST_FILES = sorted((PROM_DIR / "tests").glob("*.yml"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=60, cwd=PROM_DIR)


def test_files_exist():
    assert (PROM_DIR / "prometheus.yml").is_file()
    assert {p.name for p in RULE_FILES} == {"recording.yml", "alerts.yml"}
    assert {p.name for p in TEST_FILES} == {"recording_test.yml", "alerts_test.yml"}


def test_check_config():
    r = run("check", "config", "prometheus.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


def test_check_rules():
    r = run("check", "rules", *[str(p) for p in RULE_FILES])
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: p.name)
def test_rule_unit_tests(path):
    r = run("test", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def _names(path, key):
    import yaml

    with open(path) as f:
        doc = yaml.safe_load(f)
    return {r[key] for g in doc["groups"] for r in g["rules"] if key in r}


def test_every_rule_is_unit_tested():
    """Each recorded series is evaluated and each alert is checked by some promtool test."""
    import yaml

    recorded = _names(PROM_DIR / "rules" / "recording.yml", "record")
    alerts = _names(PROM_DIR / "rules" / "alerts.yml", "alert")
    tested_exprs, tested_alerts = set(), set()
    for path in TEST_FILES:
        with open(path) as f:
            doc = yaml.safe_load(f)
        for t in doc["tests"]:
            tested_exprs |= {c["expr"] for c in t.get("promql_expr_test", [])}
            tested_alerts |= {c["alertname"] for c in t.get("alert_rule_test", []) if c.get("exp_alerts")}
    assert recorded - tested_exprs == set(), "recording rules without a promql_expr_test"
    assert alerts - tested_alerts == set(), "alerts never tested firing"


def test_promtool_catches_a_broken_rule(tmp_path):
    """The check is real: a rule with bad PromQL fails."""
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - record: a:b:c\n        expr: sum by (x (y)\n")
    r = run("check", "rules", str(bad))
    assert r.returncode != 0
    assert "parse error" in (r.stdout + r.stderr)


def test_scrape_config_covers_every_service():
    import yaml

    with open(PROM_DIR / "prometheus.yml") as f:
        cfg = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert {"aquilia_app", "rpc_app", "aurora_app", "perfkit_load"} <= set(jobs)
    ports = {name: jobs[name]["static_configs"][0]["targets"][0] for name in ("aquilia_app", "rpc_app", "aurora_app")}
    assert ports == {"aquilia_app": "127.0.0.1:8081", "rpc_app": "127.0.0.1:8082", "aurora_app": "127.0.0.1:8083"}
    relabel = {r["replacement"]: r["regex"] for r in jobs["perfkit_load"]["metric_relabel_configs"]}
    assert set(relabel) == {"aquilia_app", "rpc_app", "aurora_app"}
    assert cfg["rule_files"] == ["rules/recording.yml", "rules/alerts.yml"]
