"""perfkit gate: the baseline files, the decision against the stored ratio, and the refusals before any load."""

import glob
import os

import pytest
from conftest import PERFKIT_DIR, run_cli

from perfkit import cli, gate, paired
from perfkit.scenarios import Registry

GOOD = '''
scenario = "aquilia_app"
base = "sanic"
variant = "aquilia_app"
workload = "json"
ratio = 1.5
tolerance = 0.2
'''


def test_parse_a_baseline():
    b = gate.parse(GOOD)
    assert (b.scenario, b.base, b.variant, b.workload) == ("aquilia_app", "sanic", "aquilia_app", "json")
    assert b.floor == pytest.approx(1.2)
    assert gate.parse(GOOD.replace("ratio = 1.5", "ratio = 2")).ratio == 2.0  # an integer is a number too


@pytest.mark.parametrize("text, message", [
    (GOOD.replace('workload = "json"\n', ""), "missing workload"),
    (GOOD + "rounds = 6\n", "unknown key(s) rounds"),
    (GOOD.replace("ratio = 1.5", 'ratio = "1.5"'), "ratio must be a number"),
    (GOOD.replace("ratio = 1.5", "ratio = 0"), "ratio must be above 0"),
    (GOOD.replace("tolerance = 0.2", "tolerance = 1.5"), "tolerance must be in [0, 1)"),
    (GOOD.replace("tolerance = 0.2", "tolerance = true"), "tolerance must be a number"),
    (GOOD.replace('base = "sanic"', 'base = "aquilia_app"'), "base and variant are the same system"),
    (GOOD.replace('scenario = "aquilia_app"', "scenario = 3"), "scenario must be a non-empty string"),
    ("scenario = ", "not TOML"),
])
def test_bad_baselines_are_refused(text, message):
    with pytest.raises(gate.GateError) as e:
        gate.parse(text, "b.toml")
    assert message in str(e.value) and str(e.value).startswith("b.toml: ")


def test_decide_passes_unless_the_whole_interval_is_below_the_floor():
    b = gate.parse(GOOD)  # floor 1.2
    assert gate.decide(b, (1.4, 1.6)) == "pass"
    assert gate.decide(b, (1.0, 1.3)) == "pass"  # straddles the floor: noise alone never fails the gate
    assert gate.decide(b, (1.0, b.floor)) == "pass"  # reaching the floor is enough
    assert gate.decide(b, (0.9, 1.19)) == "fail"


def _record(ratios, *, failed=0, status="ok"):
    """A paired record whose rounds give these variant ÷ base ratios (base 10,000 req/s, even CPU split)."""
    rounds = []
    for i, r in enumerate(ratios):
        base = {"rps": 10_000.0, "errors": 0, "failed_answers": 0, "cpu_s": 1.0, "cpu_us_per_request": 50.0}
        variant = {"rps": 10_000.0 * r, "errors": 0, "failed_answers": failed if i == 0 else 0, "cpu_s": 1.0,
                   "cpu_us_per_request": 50.0 / r}
        rounds.append({"order": ["base", "variant"] if i % 2 == 0 else ["variant", "base"], "base": base,
                       "variant": variant, "throughput_ratio": r, "cpu_ratio": r})
    return {"status": status, "error": "sanic: exited with status 1" if status != "ok" else "", "rounds": rounds,
            "throughput_ratio": paired.summarise(paired.block_ratios(rounds, "throughput_ratio")),
            "cpu_per_request_ratio": paired.summarise(paired.block_ratios(rounds, "cpu_ratio"))}


def test_judge_a_paired_record():
    b = gate.parse(GOOD)
    verdict, lines = gate.judge(b, _record([1.9, 2.0, 1.95, 2.05, 1.9, 2.0]))
    assert verdict == "pass"
    text = "\n".join(lines)
    assert "measured req/s ratio 1.9" in text and "the floor is 1.200" in text and text.endswith("PASS")
    verdict, lines = gate.judge(b, _record([1.0, 1.05, 1.02, 1.0, 0.98, 1.01]))
    assert verdict == "fail" and lines[-1] == "  FAIL: the whole interval is below 1.200"
    # fast but failing requests is no lead
    verdict, lines = gate.judge(b, _record([1.9, 2.0, 1.95, 2.05], failed=12))
    assert verdict == "fail" and "aquilia_app failed 12 requests" in "\n".join(lines)
    verdict, lines = gate.judge(b, _record([], status="failed"))
    assert verdict == "error" and "sanic: exited with status 1" in lines[-1]


def test_the_committed_baselines_name_real_systems():
    files = sorted(glob.glob(os.path.join(PERFKIT_DIR, "gates", "*.toml")))
    assert files, "perfkit/gates/*.toml missing from the test's data"
    reg = Registry.load()
    for path in files:
        b = gate.load(path)
        sc, base, variant, w = cli._paired_selection(reg, f"{b.scenario}/{b.base}", f"{b.scenario}/{b.variant}",
                                                     b.workload)
        assert (base, variant, w.name) == (b.base, b.variant, b.workload)
        assert b.floor > 1.0, f"{path}: a gate on a lead should keep the variant ahead of its base"


def test_gate_cli_refuses_bad_input_before_any_load(tmp_path):
    r = run_cli(["gate", str(tmp_path / "missing.toml")], timeout=60)
    assert r.returncode == 2 and "cannot read" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace('base = "sanic"', 'base = "nosuch"'))
    r = run_cli(["gate", str(bad)], timeout=60)
    assert r.returncode == 2 and "unknown system 'nosuch'" in r.stderr
    bad.write_text(GOOD.replace('workload = "json"', 'workload = "nosuch"'))
    r = run_cli(["gate", str(bad)], timeout=60)
    assert r.returncode == 2 and "unknown workload 'nosuch'" in r.stderr
    r = run_cli(["gate", str(tmp_path / "x.toml"), "--rounds", "3"], timeout=60)
    assert r.returncode == 2 and "--rounds must be an even number" in r.stderr


def test_a_relative_baseline_path_is_found_in_the_workspace(tmp_path, monkeypatch):
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "x.toml").write_text(GOOD)
    (tmp_path / "sub").mkdir()
    here = tmp_path / "sub" / "y.toml"
    here.write_text(GOOD)
    monkeypatch.setenv("BUILD_WORKSPACE_DIRECTORY", str(tmp_path))
    monkeypatch.setenv("BUILD_WORKING_DIRECTORY", str(tmp_path / "sub"))
    assert cli._workspace_path("y.toml") == str(here)  # where the command was started first
    assert cli._workspace_path("gates/x.toml") == str(tmp_path / "gates" / "x.toml")
