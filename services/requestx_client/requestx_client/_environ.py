"""``os.environ``'s own store, for the variables read on every request (proxies, CA bundle, netrc): looked
up by their bytes names, with no name encoded and no miss decoded as ``os.environ.get`` does. Valid only
while ``os.environ`` is still the process's mapping (a program or a test may put a dict in its place), so
every reader checks ``os.environ is ENVIRON`` first and falls back to ``os.environ`` otherwise."""

from __future__ import annotations

import os

ENVIRON = os.environ
_data = getattr(os.environ, "_data", None)
# None where the store is not a dict of bytes (not POSIX)
STORE: dict[bytes, bytes] | None = _data if os.name == "posix" and isinstance(_data, dict) else None
