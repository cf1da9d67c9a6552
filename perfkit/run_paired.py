"""Entry point of ``bazel run //perfkit:paired`` (same as ``python -m perfkit paired``)."""
import sys

from perfkit.cli import run_paired

if __name__ == "__main__":
    sys.exit(run_paired(sys.argv[1:]))
