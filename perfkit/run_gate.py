"""Entry point of ``bazel run //perfkit:gate -- BASELINE.toml`` (same as ``python -m perfkit gate``)."""
import sys

from perfkit.cli import run_gate

if __name__ == "__main__":
    sys.exit(run_gate(sys.argv[1:]))
