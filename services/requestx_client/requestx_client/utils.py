"""Helpers from ``requests.utils`` that callers use: credentials from a URL or from ``.netrc``, and the
default headers."""

from __future__ import annotations

import netrc
import os
import sys
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from . import __version__
from . import exceptions as exc
from ._body import super_len
from ._environ import ENVIRON, STORE
from ._request import requote_uri
from .structures import CaseInsensitiveDict

__all__ = ["default_headers", "default_user_agent", "get_auth_from_url", "get_netrc_auth", "requote_uri",
           "rewind_body", "super_len"]


def default_user_agent(name: str = "python-requestx-client") -> str:
    return f"{name}/{__version__}"


def default_headers() -> CaseInsensitiveDict:
    return CaseInsensitiveDict({
        "User-Agent": default_user_agent(),
        "Accept-Encoding": "gzip, deflate, br, zstd",
        "Accept": "*/*",
        "Connection": "keep-alive",
    })


def rewind_body(prepared_request: Any) -> None:
    """Seek a stream body back to where it was when the request was prepared (``_body_position``), to
    send it again for a redirect; ``UnrewindableBodyError`` if it cannot be."""
    seek = getattr(prepared_request.body, "seek", None)
    position = prepared_request._body_position
    if seek is None or not isinstance(position, int):
        raise exc.UnrewindableBodyError("Unable to rewind request body for redirect.")
    try:
        seek(position)
    except OSError:
        raise exc.UnrewindableBodyError("An error occurred when rewinding request body for redirect.") from None


def get_auth_from_url(url: str) -> tuple[str, str]:
    """(user, password) from ``user:password@`` in ``url``, unquoted; ("", "") if there is none."""
    try:
        parts = urlsplit(url)
        return unquote(parts.username or ""), unquote(parts.password or "")
    except (AttributeError, TypeError, ValueError):
        return "", ""


# Where the .netrc is and what it holds. A session without auth asks on every request, so the file
# system is looked at again at most once a second (at once when NETRC or HOME change), and the file
# is parsed again only when its modification time or size changed. The cache is one tuple, replaced
# whole, so a reader needs no lock: (NETRC and HOME, when checked, path, (mtime, size), parsed).
_RECHECK_SECONDS = 1.0
_lock = threading.Lock()
_cache: tuple[Any, float, str | None, Any, netrc.netrc | None] = (None, 0.0, None, None, None)


def _netrc_path() -> str | None:
    env = os.environ.get("NETRC")
    candidates = (env,) if env is not None else ("~/.netrc", "~/_netrc")
    for name in candidates:
        path = os.path.expanduser(name)
        if os.path.exists(path):
            return path
    return None


# the netrc variables' names in os.environ's own store (see _environ.py): read on every request
_ENV_KEYS = (b"NETRC", b"HOME") if STORE is not None else None


def _load_netrc(raise_errors: bool) -> netrc.netrc | None:
    global _cache
    if _ENV_KEYS is not None and os.environ is ENVIRON:
        get = STORE.get  # type: ignore[union-attr]
        key = (get(_ENV_KEYS[0]), get(_ENV_KEYS[1]))
    else:
        key = (os.environ.get("NETRC"), os.environ.get("HOME"))
    now = time.monotonic()
    cached = _cache
    if cached[0] == key and now - cached[1] < _RECHECK_SECONDS and not raise_errors:
        return cached[4]
    with _lock:
        path = _netrc_path()
        if path is None:
            _cache = (key, now, None, None, None)
            return None
        try:
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size)
            if path == cached[2] and stamp == cached[3] and cached[4] is not None:
                _cache = (key, now, path, stamp, cached[4])
                return cached[4]
            parsed = netrc.netrc(path)
        except (netrc.NetrcParseError, OSError):
            _cache = (key, now, None, None, None)
            if raise_errors:
                raise
            return None
        _cache = (key, now, path, stamp, parsed)
        return parsed


def get_netrc_auth(url: str, raise_errors: bool = False) -> tuple[str, str] | None:
    """(login, password) for the host of ``url`` from the file named by ``NETRC``, else ``~/.netrc``
    (or ``~/_netrc``); None when there is no file or no entry (a ``default`` entry counts). A file that
    cannot be parsed counts as none unless ``raise_errors``."""
    parsed = _load_netrc(raise_errors)  # first: without a file, the URL need not be parsed
    if parsed is None:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    entry = parsed.authenticators(host) if host else None
    if not entry:
        return None
    login, account, password = entry
    return (login or account or ""), (password or "")


_CA_KEYS = (b"REQUESTS_CA_BUNDLE", b"CURL_CA_BUNDLE")
_FS_ENCODING = sys.getfilesystemencoding()


def env_ca_bundle() -> str | None:
    """The CA bundle named by REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE, read at each call as requests does."""
    if _ENV_KEYS is not None and os.environ is ENVIRON:
        get = STORE.get  # type: ignore[union-attr]
        value = get(_CA_KEYS[0]) or get(_CA_KEYS[1])
        return value.decode(_FS_ENCODING, "surrogateescape") if value else None  # os.fsdecode, inline
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None
