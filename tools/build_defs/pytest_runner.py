"""Entry point of every py_pytest_test: runs pytest on the test files Bazel hands it.

- JUnit XML goes to Bazel's XML_OUTPUT_FILE, so test results show per case in the test report.
- No import leaks: the interpreter's own site-packages are taken off sys.path before pytest is
  imported, so a test imports only what its BUILD target declares (its runfiles), never whatever
  happens to be installed on the machine.
- `--bazel-env=KEY=VALUE` arguments (from the macro's `env`) are exported, with runfiles-relative
  paths made absolute so that tests may chdir.
"""
import os
import sys


def _strip_machine_site_packages() -> None:
    runfiles = os.path.realpath(os.environ.get("RUNFILES_DIR") or os.environ.get("TEST_SRCDIR") or os.getcwd())
    keep = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else entry
        if ("site-packages" in entry or "dist-packages" in entry) and not real.startswith(runfiles) and "/external/" not in entry:
            continue
        keep.append(entry)
    sys.path[:] = keep


def main() -> int:
    _strip_machine_site_packages()
    argv = []
    for arg in sys.argv[1:]:
        if arg.startswith("--bazel-env="):
            key, _, value = arg[len("--bazel-env="):].partition("=")
            if value and os.path.exists(value):
                value = os.path.abspath(value)
            os.environ[key] = value
        else:
            argv.append(arg)

    import pytest  # after the sys.path clean-up: the locked pytest from the runfiles

    args = ["-p", "no:cacheprovider", "-o", "console_output_style=classic", "-ra"]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args += ["--junitxml", xml]
    return pytest.main(args + argv)


if __name__ == "__main__":
    sys.exit(main())
