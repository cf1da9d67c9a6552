"""toolchains.bzl: the discovered tools are recorded with their versions."""
import sys


def test_versions_file_records_every_toolchain(runfile):
    lines = runfile("TOOLCHAIN_VERSIONS").read_text().splitlines()
    tools = {line.split()[0]: line for line in lines}
    assert set(tools) >= {"python3", "rustc", "cargo", "LDC", "fingerprint"}, lines
    assert tools["python3"].split()[1].startswith("3.11.")
    # Every recorded path is absolute (no reliance on PATH inside actions).
    for key in ("python3", "rustc", "cargo"):
        assert tools[key].split()[-1].startswith("/"), tools[key]


def test_tests_run_on_the_recorded_interpreter(runfile):
    recorded = next(l for l in runfile("TOOLCHAIN_VERSIONS").read_text().splitlines() if l.startswith("python3 "))
    assert recorded.split()[1] == "%d.%d.%d" % sys.version_info[:3]
