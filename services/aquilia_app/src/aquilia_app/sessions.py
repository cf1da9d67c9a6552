"""Signed-cookie sessions, as native middleware.

``request.session`` is a dict kept in the client's cookie: the JSON (orjson) of the dict,
base64-encoded and signed with ``itsdangerous.TimestampSigner`` (HMAC-SHA256, a timestamp inside).
The client can read the data but not change it, so keep secrets out of it.  A cookie that is
tampered with, expired (older than ``max_age``) or signed with a key no longer listed reads as an
empty session - never an error - and is deleted.

The cookie is written only when the session changed (``Session.modified``: set by every dict method
that changes it; set it yourself after changing a nested value in place, e.g.
``session["cart"].append(x)``), and deleted when the session was emptied.  Assigning
``request.session`` a new dict (or None) replaces the session.  The timestamp is the time
of the last write, so a session lives ``max_age`` seconds after its last change.

Key rotation: ``secret_key`` may be a list, newest first; the newest signs, all verify.
"""
from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any, Iterable

import orjson
from itsdangerous import BadSignature, TimestampSigner
from itsdangerous.encoding import base64_decode, base64_encode

from .middleware import Middleware
from .responses import cookie_header

__all__ = ["SessionMiddleware", "Session", "SessionTooLarge", "SESSION_SALT", "MAX_SESSION_COOKIE"]

log = logging.getLogger("aquilia_app.sessions")
SESSION_SALT = b"aquilia_app.sessions"  # keys used here sign nothing else
MAX_SESSION_COOKIE = 4093  # name=value bytes: under every browser's 4096 with room for its counting
MIN_KEY_BYTES = 16
_SAME_SITE = ("lax", "strict", "none")


class SessionTooLarge(RuntimeError):
    """The session does not fit in a cookie: the app must keep less in it (a 500: a server bug)."""


class Session(dict):
    """A dict that notes whether it was changed (``modified``)."""

    __slots__ = ("modified",)

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.modified = False

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.modified = True

    def __delitem__(self, key):
        super().__delitem__(key)
        self.modified = True

    def __ior__(self, other):
        self.update(other)
        return self

    def clear(self):
        if self:
            self.modified = True
        super().clear()

    def pop(self, key, *default):
        if key in self:
            self.modified = True
        return super().pop(key, *default)

    def popitem(self):
        item = super().popitem()
        self.modified = True
        return item

    def setdefault(self, key, default=None):
        if key not in self:
            self.modified = True
        return super().setdefault(key, default)

    def update(self, *args, **kw):
        super().update(*args, **kw)
        self.modified = True


def _keys(secret_key) -> list:
    """Secrets as a list oldest first (itsdangerous's order), each checked."""
    keys = [secret_key] if isinstance(secret_key, (str, bytes)) else list(secret_key)
    if not keys:
        raise ValueError("secret_key: give at least one key")
    for k in keys:
        if not isinstance(k, (str, bytes)):
            raise TypeError(f"secret_key: a key is str or bytes, not {type(k).__name__}")
        if len(k.encode() if isinstance(k, str) else k) < MIN_KEY_BYTES:
            raise ValueError(f"secret_key: every key needs at least {MIN_KEY_BYTES} bytes "
                             "(e.g. secrets.token_urlsafe(32))")
    return keys[::-1]


def _seconds(max_age) -> int | None:
    if isinstance(max_age, timedelta):
        max_age = max_age.total_seconds()
    if max_age is None:
        return None
    if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) or max_age < 1:
        raise ValueError(f"max_age must be at least 1 second (int, float or timedelta) or None, not {max_age!r}")
    return int(max_age)


class SessionMiddleware(Middleware):
    """See the module docstring.  ``max_age=None``: a browser-session cookie whose signature never
    expires.  ``serializer``: any object with ``dumps(obj) -> bytes|str`` and ``loads(bytes)``."""

    def __init__(self, secret_key: str | bytes | Iterable[str | bytes], cookie_name: str = "session",
                 max_age: int | float | timedelta | None = 14 * 24 * 3600, path: str = "/",
                 domain: str | None = None, same_site: str = "lax", https_only: bool = False,
                 serializer: Any = orjson):
        if not (callable(getattr(serializer, "dumps", None)) and callable(getattr(serializer, "loads", None))):
            raise TypeError("serializer needs dumps() and loads() (like orjson or json)")
        if same_site not in _SAME_SITE:
            raise ValueError(f"same_site must be one of {', '.join(_SAME_SITE)}, not {same_site!r}")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"path must start with '/', not {path!r}")
        self.signer = TimestampSigner(_keys(secret_key), salt=SESSION_SALT, digest_method=hashlib.sha256)
        self.cookie_name = cookie_name
        self.max_age = _seconds(max_age)
        self.serializer = serializer
        self._attrs = dict(path=path, domain=domain, secure=bool(https_only), httponly=True, samesite=same_site)
        # the cookie's attributes are checked now (name, path, domain, SameSite=None without Secure ...)
        self._deletion = cookie_header(cookie_name, "", 0, "Thu, 01 Jan 1970 00:00:00 GMT", **self._attrs)

    # -- the cookie's value ----------------------------------------------------------------------
    def dumps(self, data: dict) -> str:
        """The signed cookie value for ``data``."""
        try:
            payload = self.serializer.dumps(data)
        except (TypeError, ValueError) as e:
            raise TypeError(f"the session holds a value that cannot be serialized: {e}") from None
        if isinstance(payload, str):
            payload = payload.encode()
        return self.signer.sign(base64_encode(payload)).decode("ascii")

    def loads(self, value: str) -> dict | None:
        """The session in a cookie value, or None when it is tampered, expired or unreadable."""
        try:
            payload = self.signer.unsign(value, max_age=self.max_age)
            data = self.serializer.loads(base64_decode(payload))
        except BadSignature:  # also SignatureExpired
            return None
        except Exception:  # signed by us but unreadable (a serializer change): start afresh
            log.debug("session cookie signed but not readable", exc_info=True)
            return None
        return data if isinstance(data, dict) else None

    def _incoming(self, request) -> str | None:
        # Cookie parsing by hand: http.cookies.SimpleCookie drops the whole header when any one
        # cookie (maybe another app's) is malformed; only our name=value pair matters here.
        name = self.cookie_name
        for line in request.headers.getall("cookie"):
            for part in line.split(";"):
                key, eq, value = part.strip().partition("=")
                if eq and key == name:
                    return value.strip().strip('"')
        return None

    # -- the middleware ------------------------------------------------------------------------
    async def __call__(self, request, call_next):
        raw = self._incoming(request)
        data = self.loads(raw) if raw else None
        session = request.session = Session(data) if data else Session()
        response = await call_next(request)
        if request.session is not session:  # the handler assigned a new dict (or None): that is the session now
            session = Session(request.session or ())
            session.modified = True
        if session.modified and session:
            return response.with_headers([("set-cookie", self._cookie(session))])
        if raw is not None and (not session or data is None):  # emptied, or it was invalid
            return response.with_headers([("set-cookie", self._deletion)])
        return response

    async def websocket(self, ws) -> None:
        """A WebSocket reads the session of its handshake's cookie (as Starlette's ``websocket.session``);
        a socket has no response headers, so changes to it are not sent back."""
        raw = self._incoming(ws)
        data = self.loads(raw) if raw else None
        ws.session = Session(data) if data else Session()

    def _cookie(self, session: Session) -> str:
        value = self.dumps(session)
        size = len(self.cookie_name) + 1 + len(value)
        if size > MAX_SESSION_COOKIE:
            message = (f"the session cookie would be {size} bytes, over the {MAX_SESSION_COOKIE} a browser "
                       "keeps: store less in the session (e.g. an id, with the data server-side)")
            log.warning("%s (keys: %s)", message, ", ".join(map(str, session))[:200])
            raise SessionTooLarge(message)
        return cookie_header(self.cookie_name, value, self.max_age, None, **self._attrs)
