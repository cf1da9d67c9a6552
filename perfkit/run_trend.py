"""Entry point of ``bazel run //perfkit:trend -- SCENARIO`` (same as ``python -m perfkit trend``)."""
import sys

from perfkit.cli import run_trend

if __name__ == "__main__":
    sys.exit(run_trend(sys.argv[1:]))
