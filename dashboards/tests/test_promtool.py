"""promtool check config / check rules / test rules on dashboards/prometheus."""
from __future__ import annotations

import shutil
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
    assert {p.name for p in TEST_FILES} == {"recording_test.yml", "alerts_test.yml", "slo_test.yml"}


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
    """Targets come from files (file_sd): the committed defaults for tools/obs, and the bench's directory. Every
    default target names its job and service; the load engine's series get no port-based relabelling."""
    import yaml

    with open(PROM_DIR / "prometheus.yml") as f:
        cfg = yaml.safe_load(f)
    assert cfg["rule_files"] == ["rules/recording.yml", "rules/alerts.yml"]
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    sd = jobs["perfmono"]
    assert sd["honor_labels"] is True  # a series' own `service` label wins over the file's
    assert [c["files"] for c in sd["file_sd_configs"]] == [["targets/*.yml", "sd/*.json"]]
    assert "static_configs" not in sd
    assert not any("relabel_configs" in j or "metric_relabel_configs" in j for j in cfg["scrape_configs"])
    with open(PROM_DIR / "targets" / "defaults.yml") as f:
        groups = yaml.safe_load(f)
    by_job = {g["labels"]["job"]: g for g in groups}
    assert {name: by_job[name]["targets"] for name in ("aquilia_app", "rpc_app", "aurora_app", "perfkit_load")} == {
        "aquilia_app": ["127.0.0.1:8081"], "rpc_app": ["127.0.0.1:8082"], "aurora_app": ["127.0.0.1:8083"],
        "perfkit_load": ["127.0.0.1:9464"]}
    for name in ("aquilia_app", "rpc_app", "aurora_app"):
        assert by_job[name]["labels"]["service"] == name
    assert "service" not in by_job["perfkit_load"]["labels"]  # a run started by hand aims at any service


# ---- the SLO tests can fail: each planted fault in alerts.yml must make slo_test.yml fail -------------------
# (the fault, the case of slo_test.yml that catches it)
MUTATIONS = {
    "no minimum-traffic guard": (("* 300 >= 100", "* 300 >= 0"), ("* 1800 >= 100", "* 1800 >= 0"),
                                 ("* 21600 >= 100", "* 21600 >= 0")),
    "no long window (a blip pages)": (("ratio_rate1h / 0.001 > 14.4", "ratio_rate1h / 0.001 > 0"),
                                      ("ratio_rate6h / 0.001 > 6", "ratio_rate6h / 0.001 > 0")),
    "no short window (the page never stops)": (("ratio_rate5m / 0.001 > 14.4", "ratio_rate5m / 0.001 > -1"),
                                               ("ratio_rate30m / 0.001 > 6", "ratio_rate30m / 0.001 > -1")),
    "no 6x tier (availability)": (("ratio_rate6h / 0.001 > 6", "ratio_rate6h / 0.001 > 60"),),
    "no 6x tier (latency)": (("ratio_rate6h / 0.01 > 6", "ratio_rate6h / 0.01 > 60"),),
    "an availability ticket that never opens": (("ratio_rate3d / 0.001 > 1", "ratio_rate3d / 0.001 > 1000"),),
    "a latency ticket that never opens": (("ratio_rate3d / 0.01 > 1", "ratio_rate3d / 0.01 > 1000"),),
    "a latency page at a 1x burn": (("ratio_rate1h / 0.01 > 14.4", "ratio_rate1h / 0.01 > 1"),
                                    ("ratio_rate5m / 0.01 > 14.4", "ratio_rate5m / 0.01 > 1"),
                                    ("ratio_rate6h / 0.01 > 6", "ratio_rate6h / 0.01 > 1"),
                                    ("ratio_rate30m / 0.01 > 6", "ratio_rate30m / 0.01 > 1")),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_slo_tests_catch_a_planted_fault(tmp_path, name):
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    shutil.copy(PROM_DIR / "rules" / "recording.yml", tmp_path / "rules")
    shutil.copy(PROM_DIR / "tests" / "slo_test.yml", tmp_path / "tests")
    text = (PROM_DIR / "rules" / "alerts.yml").read_text()
    for old, new in MUTATIONS[name]:
        assert old in text, f"{name}: {old!r} not in alerts.yml any more: update the mutation"
        text = text.replace(old, new)
    (tmp_path / "rules" / "alerts.yml").write_text(text)
    r = subprocess.run([promtool(), "test", "rules", "slo_test.yml"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path / "tests")
    assert r.returncode != 0 and "FAILED" in r.stdout + r.stderr, f"{name}: slo_test.yml still passes"
