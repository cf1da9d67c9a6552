"""Which proxy a request goes through, decided as requests decides it: the ``proxies`` mapping (keys
``scheme://host``, ``scheme``, ``all://host``, ``all``, most specific first), and with ``trust_env``
the ``*_proxy`` variables of the environment unless ``no_proxy`` / ``NO_PROXY`` names the host. The
environment is read at every request (a program may change it between two), so the read is cheap:
the variables are looked up by their bytes names in ``os.environ``'s own store."""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any
from urllib.parse import urlsplit

from . import exceptions as exc
from ._environ import ENVIRON, STORE

__all__ = ["environ_proxies", "resolve_proxies", "select_proxy", "should_bypass_proxies", "checked_proxy_url"]

# the variables that can apply to an http(s) URL
_SCHEMES = ("http", "https", "all")
_NAMES = tuple(n for s in _SCHEMES for n in (f"{s}_proxy", f"{s.upper()}_PROXY")) + ("no_proxy", "NO_PROXY")

# the names in os.environ's own store (see _environ.py); a name missing there costs one dict lookup
_KEYS = tuple(n.encode() for n in _NAMES) if STORE is not None else None
_KEYSET = frozenset(_KEYS or ())


def _environ_values() -> dict[str, str]:
    """The proxy variables that are set and not empty, by their names."""
    if _KEYS is not None and os.environ is ENVIRON:
        if not STORE.keys() & _KEYSET:  # type: ignore[union-attr]  (the usual case, in one set operation)
            return {}
        get = STORE.get  # type: ignore[union-attr]
        found = {}
        for key in _KEYS:
            v = get(key)
            if v:
                found[key.decode()] = os.fsdecode(v)
        return found
    return {n: os.environ[n] for n in _NAMES if os.environ.get(n)}


def environ_proxies(url: str, no_proxy: str | None = None) -> dict[str, str]:
    """The proxies the environment gives for ``url`` ({} when none, or when ``no_proxy`` or the
    environment's no_proxy names its host). Lower-case names win over upper-case, as in urllib."""
    values = _environ_values()
    if not values:
        return {}
    if should_bypass_proxies(url, no_proxy, values):
        return {}
    proxies: dict[str, str] = {}
    for name, value in values.items():
        if name.lower() == "no_proxy":
            continue
        scheme = name[:-6].lower()
        if name.islower() or scheme not in proxies:
            proxies[scheme] = value
    return proxies


def should_bypass_proxies(url: str, no_proxy: str | None = None, values: dict[str, str] | None = None) -> bool:
    """Whether ``url`` goes direct: its host (or host:port) ends with a ``no_proxy`` entry, is an IP
    address in a listed network (CIDR) or equal to a listed one, or the list is ``*``. A URL without a
    host goes direct."""
    if values is None:
        values = _environ_values()
    if no_proxy is None:
        no_proxy = values.get("no_proxy") or values.get("NO_PROXY")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return False
    if host is None:
        return True
    if not no_proxy:
        return False
    entries = [e.strip() for e in no_proxy.replace(" ", "").split(",") if e.strip()]
    if "*" in entries:
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        addr = None
    if addr is not None:
        for entry in entries:
            try:
                if addr in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False
    host_port = f"{host}:{port}" if port else host
    for entry in entries:
        suffix = entry.lower().lstrip("*")
        bare = suffix.lstrip(".")
        if host == bare or host_port == bare or host.endswith("." + bare) or host_port.endswith("." + bare):
            return True
    return False


def select_proxy(url: str, proxies: Any) -> str | None:
    """The proxy URL ``proxies`` gives for ``url``: ``scheme://host``, then ``scheme``, ``all://host``,
    ``all``."""
    if not proxies:
        return None
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname
    if host is None:
        return proxies.get(scheme, proxies.get("all"))
    for key in (f"{scheme}://{host}", scheme, f"all://{host}", "all"):
        if key in proxies:
            return proxies[key]
    return None


def resolve_proxies(url: str, proxies: Any, trust_env: bool) -> dict[str, str]:
    """``proxies`` plus, with ``trust_env``, the environment's proxy for ``url``'s scheme (unless the
    mapping gives one already or no_proxy names the host)."""
    resolved = dict(proxies) if proxies else {}
    if trust_env:
        env = environ_proxies(url, resolved.get("no_proxy"))
        if env:
            scheme = urlsplit(url).scheme.lower()
            proxy = env.get(scheme, env.get("all"))
            if proxy:
                resolved.setdefault(scheme, proxy)
    return resolved


# a scheme, unless what follows the colon is a port ("localhost:3128" has none)
_HAS_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?!\d+(?:/|$))")


def checked_proxy_url(proxy: str) -> str:
    """``proxy`` with ``http://`` added when it has no scheme; ``InvalidProxyURL`` when it has no host."""
    if not _HAS_SCHEME.match(proxy):
        proxy = "http://" + proxy
    try:
        host = urlsplit(proxy).hostname
    except ValueError:
        host = None
    if not host:
        raise exc.InvalidProxyURL("Please check proxy URL. It is malformed and could be missing the host.")
    return proxy
