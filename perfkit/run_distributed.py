"""Entry point of ``bazel run //perfkit:distributed`` (same as ``python -m perfkit distributed``)."""
import sys

from perfkit.cli import run_distributed

if __name__ == "__main__":
    sys.exit(run_distributed(sys.argv[1:]))
