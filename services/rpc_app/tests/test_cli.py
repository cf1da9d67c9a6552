"""The command line: bad arguments give a message and a non-zero exit."""

import subprocess
import sys

from helpers import child_env


def test_cli_rejects_bad_arguments():
    r = subprocess.run([sys.executable, "-m", "rpc_app", "--port", "70000"], capture_output=True, text=True,
                       env=child_env(), timeout=20)
    assert r.returncode != 0 and "--port" in r.stderr
    r = subprocess.run([sys.executable, "-m", "rpc_app", "--port", "0", "--max-depth", "0"], capture_output=True,
                       text=True, env=child_env(), timeout=20)
    assert r.returncode != 0 and "max_depth" in r.stderr
