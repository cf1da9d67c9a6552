"""Every committed dashboard against Grafana's dashboard schema (@grafana/schema, checked by the TypeScript
compiler), and proof that the check fails on the mistakes it exists to catch."""
from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import pytest

from dashlib import GRAFANA_DIR, iter_panels, load_dashboards

sys.path.insert(0, str(GRAFANA_DIR))
import schema_check  # noqa: E402

DASHES = load_dashboards()


def _runfile(env: str) -> Path:
    value = os.environ.get(env)
    assert value, f"{env} is not set (the Bazel target passes it)"
    return Path(value).absolute()


NODE_MODULES = _runfile("NPM_PACKAGE_JSON").parent / "node_modules"
NODE = _runfile("NODE_PATH_FILE").read_text().strip()


def check(dashboards):
    return schema_check.check(dashboards, NODE_MODULES, node=NODE)


def first_panel(dash: dict, ptype: str) -> dict:
    return next(p for p in iter_panels(dash) if p["type"] == ptype)


def test_committed_dashboards_match_the_schema():
    assert check(DASHES) == []


def test_every_panel_type_used_has_a_schema():
    schemas = schema_check.panel_schemas(NODE_MODULES)
    assert {"timeseries", "heatmap", "stat", "table"} <= set(schemas)
    used = {p["type"] for d in DASHES.values() for p in iter_panels(d)} - {"row"}
    assert used <= set(schemas)


def _planted(mutate) -> list[str]:
    dash = copy.deepcopy(DASHES["overview.json"])
    mutate(dash)
    return check({"planted.json": dash})


def test_a_field_of_the_wrong_type_fails():
    def mutate(d):
        first_panel(d, "timeseries")["gridPos"]["h"] = "8"
    problems = _planted(mutate)
    assert len(problems) == 1 and "planted.json" in problems[0] and "'string' is not assignable" in problems[0], problems


def test_an_unknown_panel_type_fails():
    def mutate(d):
        first_panel(d, "timeseries")["type"] = "timeseries-typo"
    problems = _planted(mutate)
    assert any("panel type 'timeseries-typo' has no schema" in p for p in problems), problems


def test_a_field_the_schema_does_not_know_fails():
    def mutate(d):
        d["refreshEvery"] = "5s"
    problems = _planted(mutate)
    assert any("'\"refreshEvery\"' does not exist" in p for p in problems), problems


def test_a_bad_enum_value_in_panel_options_fails():
    def mutate(d):
        first_panel(d, "timeseries")["options"]["legend"]["displayMode"] = "tabular"
    problems = _planted(mutate)
    assert len(problems) == 1 and ": options: " in problems[0] and '"tabular"' in problems[0], problems


def test_a_missing_required_field_fails():
    def mutate(d):
        del d["templating"]["list"][0]["name"]
    problems = _planted(mutate)
    assert any("'name' is missing" in p for p in problems), problems


def test_heatmap_options_are_checked_against_the_heatmap_schema():
    dash = copy.deepcopy(next(d for d in DASHES.values() if any(p["type"] == "heatmap" for p in iter_panels(d))))
    first_panel(dash, "heatmap")["options"]["tooltip"]["show"] = True  # the pre-11 form: gone from the schema
    problems = check({"planted.json": dash})
    assert len(problems) == 1 and "(heatmap): options" in problems[0] and "'\"show\"' does not exist" in problems[0], problems


def test_the_command_line_exits_non_zero_on_a_bad_dashboard(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text((GRAFANA_DIR / "dashboards" / "overview.json").read_text())
    assert schema_check.main(["--node-modules", str(NODE_MODULES), str(good)]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"title": 5}')
    assert schema_check.main(["--node-modules", str(NODE_MODULES), str(bad)]) == 1
    assert "bad.json" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert schema_check.main(["--node-modules", str(NODE_MODULES), str(broken)]) == 2
