"""Entry point of ``bazel run //perfkit:compare -- A/results.json B/results.json``."""
import sys

from perfkit.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare"] + sys.argv[1:]))
