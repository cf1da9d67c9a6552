"""rust.bzl: cargo_binary runs, pyo3_extension imports (cargo_test is its own target)."""
import subprocess


def test_cargo_binary_runs(runfile):
    out = subprocess.run([runfile("RULE_EXAMPLE"), "100"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "triangle(100) = 5050"


def test_pyo3_extension_imports_and_calls_rust():
    import rule_example_py

    assert rule_example_py.triangle(4) == 10
    assert rule_example_py._example.__file__.endswith("_example.abi3.so")
    try:
        rule_example_py.triangle(-1)
    except OverflowError:
        pass
    else:
        raise AssertionError("a negative u32 must raise OverflowError")
