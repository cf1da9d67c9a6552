"""Entry point of ``bazel run //services/aquilia_app -- --port 8081`` (same as ``python -m aquilia_app``)."""
import sys

from aquilia_app.server import main

if __name__ == "__main__":
    sys.exit(main())
