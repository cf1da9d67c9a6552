"""Entry point of ``bazel run //services/rpc_app`` (same as ``python -m rpc_app``)."""

import sys

from rpc_app.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
