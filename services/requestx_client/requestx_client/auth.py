"""Authentication helpers, as ``requests.auth``: objects called with the prepared request."""

from __future__ import annotations

import base64
import warnings
from typing import Any


def _credential(value: Any) -> bytes:
    """A user name or password as bytes (a str in latin-1). Anything else is taken as its str, with the
    DeprecationWarning requests 2.x gives."""
    if isinstance(value, str):
        return value.encode("latin-1")
    if isinstance(value, bytes):
        return value
    warnings.warn("Non-string usernames will no longer be supported in Requests 3.0.0. Please convert the "
                  f"object you've passed in ({value!r}) to a string or bytes object in the near future to "
                  "avoid problems.", DeprecationWarning, stacklevel=3)
    return str(value).encode("latin-1")


def _basic_value(username: Any, password: Any) -> str:
    return "Basic " + base64.b64encode(_credential(username) + b":" + _credential(password)).decode("ascii")


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
