"""Entry point of ``bazel run //perfkit:bench`` (same as ``python -m perfkit``)."""
import sys

from perfkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
