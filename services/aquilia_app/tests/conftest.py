import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (os.path.join(ROOT, "src"), HERE):  # the package root and this folder (server_util)
    if p not in sys.path:
        sys.path.insert(0, p)
