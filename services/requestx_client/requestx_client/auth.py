"""Authentication helpers, as ``requests.auth``: objects called with the prepared request."""

from __future__ import annotations

import base64
from typing import Any


def _basic_value(username: str | bytes, password: str | bytes) -> str:
    u = username.encode("latin-1") if isinstance(username, str) else username
    p = password.encode("latin-1") if isinstance(password, str) else password
    return "Basic " + base64.b64encode(u + b":" + p).decode("ascii")


class AuthBase:
    """Base class: subclasses implement ``__call__(request) -> request``."""

    def __call__(self, r: Any) -> Any:
        raise NotImplementedError("Auth hooks must be callable.")


class HTTPBasicAuth(AuthBase):
    """HTTP Basic authentication."""

    def __init__(self, username: str | bytes, password: str | bytes) -> None:
        self.username = username
        self.password = password
        self._value = _basic_value(username, password)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HTTPBasicAuth) and (self.username, self.password) == (other.username, other.password)

    def __call__(self, r: Any) -> Any:
        r.headers["Authorization"] = self._value
        return r


class HTTPBearerAuth(AuthBase):
    """``Authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HTTPBearerAuth) and self.token == other.token

    def __call__(self, r: Any) -> Any:
        r.headers["Authorization"] = "Bearer " + self.token
        return r


BearerAuth = HTTPBearerAuth


class HTTPProxyAuth(HTTPBasicAuth):
    """Basic credentials for the proxy (``Proxy-Authorization``)."""

    def __call__(self, r: Any) -> Any:
        r.headers["Proxy-Authorization"] = self._value
        return r


from .digest import HTTPDigestAuth  # noqa: E402  (digest.py builds on AuthBase above)

__all__ = ["AuthBase", "BearerAuth", "HTTPBasicAuth", "HTTPBearerAuth", "HTTPDigestAuth", "HTTPProxyAuth"]


def _basic_auth_str(username: str | bytes, password: str | bytes) -> str:
    """The value of a Basic ``Authorization`` header (requests' helper of the same name)."""
    return _basic_value(username, password)
