"""Make the tests' helper module importable as `dashlib` (Bazel's runfiles tree has __init__.py files
everywhere, so pytest would not put this folder on sys.path by itself)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
