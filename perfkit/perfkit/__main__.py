"""``python -m perfkit``: see perfkit.cli."""
import sys

from perfkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
