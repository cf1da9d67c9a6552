"""A small cookie jar: Set-Cookie parsing, domain/path/secure/expiry matching, dict-like access."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Cookie:
    name: str
    value: str
    domain: str = ""          # lower-case host or domain, without a leading dot
    path: str = "/"
    secure: bool = False
    expires: float | None = None  # unix time, None for a session cookie
    host_only: bool = True

    def expired(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now

    def matches(self, host: str, path: str, secure: bool, now: float) -> bool:
        if self.expired(now) or (self.secure and not secure):
            return False
        if self.domain:
            if self.host_only:
                if host != self.domain:
                    return False
            elif host != self.domain and not host.endswith("." + self.domain):
                return False
        if path != self.path and not path.startswith(self.path if self.path.endswith("/") else self.path + "/"):
            return False
        return True


def _default_path(path: str) -> str:
    if not path.startswith("/") or path.count("/") <= 1:
        return "/"
    return path[: path.rfind("/")]


def parse_set_cookie(header: str, host: str, path: str, now: float | None = None) -> Cookie | None:
    """Parse one Set-Cookie value sent by ``host`` for a request to ``path``; None if rejected."""
    now = time.time() if now is None else now
    parts = header.split(";")
    name, sep, value = parts[0].partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        return None
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    cookie = Cookie(name, value, domain=host, path=_default_path(path))
    max_age_seen = False
    for attr in parts[1:]:
        key, _, val = attr.partition("=")
        key, val = key.strip().lower(), val.strip()
        if key == "domain" and val:
            dom = val.lstrip(".").lower()
            if host != dom and not host.endswith("." + dom):
                return None  # a server may not set cookies for another domain
            cookie.domain, cookie.host_only = dom, False
        elif key == "path" and val.startswith("/"):
            cookie.path = val
        elif key == "secure":
            cookie.secure = True
        elif key == "max-age":
            try:
                cookie.expires = now + int(val)
                max_age_seen = True
            except ValueError:
                pass
        elif key == "expires" and not max_age_seen:
            try:
                cookie.expires = parsedate_to_datetime(val).timestamp()
            except (TypeError, ValueError, IndexError, OverflowError):
                pass
    return cookie


class RequestsCookieJar(MutableMapping[str, str]):
    """Cookie jar with the dict-like interface of ``requests.cookies.RequestsCookieJar``."""

    def __init__(self) -> None:
        self._cookies: dict[tuple[str, str, str], Cookie] = {}

    # --- dict interface (by name) ---
    def __getitem__(self, name: str) -> str:
        found = [c for c in list(self._cookies.values()) if c.name == name]
        if not found:
            raise KeyError(name)
        return found[-1].value

    def __setitem__(self, name: str, value: str) -> None:
        self.set(name, value)

    def __delitem__(self, name: str) -> None:
        keys = [k for k, c in list(self._cookies.items()) if c.name == name]
        if not keys:
            raise KeyError(name)
        for k in keys:
            del self._cookies[k]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(c.name for c in list(self._cookies.values())))

    def __len__(self) -> int:
        return len(self._cookies)

    def __bool__(self) -> bool:
        return bool(self._cookies)

    def __repr__(self) -> str:
        return f"<RequestsCookieJar {list(self._cookies.values())!r}>"

    def set(self, name: str, value: str | None, domain: str = "", path: str = "/", secure: bool = False,
            expires: float | None = None) -> Cookie | None:
        if value is None:
            for k in [k for k, c in list(self._cookies.items()) if c.name == name]:
                del self._cookies[k]
            return None
        cookie = Cookie(name, str(value), domain.lstrip(".").lower(), path, secure, expires, host_only=False)
        self.set_cookie(cookie)
        return cookie

    def set_cookie(self, cookie: Cookie) -> None:
        key = (cookie.domain, cookie.path, cookie.name)
        if cookie.expired(time.time()):
            self._cookies.pop(key, None)
        else:  # one dict store: atomic under the GIL, so sessions shared by threads stay consistent
            self._cookies[key] = cookie

    def get_dict(self, domain: str | None = None, path: str | None = None) -> dict[str, str]:
        return {c.name: c.value for c in list(self._cookies.values())
                if (domain is None or c.domain == domain) and (path is None or c.path == path)}

    def update(self, other: Any = (), **kw: str) -> None:  # type: ignore[override]
        if isinstance(other, RequestsCookieJar):
            for c in list(other._cookies.values()):
                self.set_cookie(c)
        else:
            super().update(other, **kw)

    def copy(self) -> "RequestsCookieJar":
        new = RequestsCookieJar()
        new._cookies = dict(self._cookies)
        return new

    def clear(self, domain: str | None = None) -> None:  # type: ignore[override]
        if domain is None:
            self._cookies.clear()
        else:
            for k in [k for k in list(self._cookies) if k[0] == domain]:
                del self._cookies[k]

    def cookies(self) -> list[Cookie]:
        return list(self._cookies.values())

    # --- HTTP side ---
    def extract(self, set_cookie_values: list[str], url: str) -> list[Cookie]:
        """Store the cookies of a response to ``url``; return the ones accepted."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        now = time.time()
        accepted = []
        for header in set_cookie_values:
            c = parse_set_cookie(header, host, parts.path or "/", now)
            if c is not None:
                self.set_cookie(c)
                accepted.append(c)
        return accepted

    def header_for(self, url: str, extra: Mapping[str, str] | None = None) -> str | None:
        """The Cookie header value to send to ``url``, or None."""
        pairs: dict[str, str] = {}
        if self._cookies:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
            now = time.time()
            matching = [c for c in list(self._cookies.values())
                        if c.matches(host, parts.path or "/", parts.scheme == "https", now)]
            matching.sort(key=lambda c: len(c.path), reverse=True)
            for c in matching:
                pairs.setdefault(c.name, c.value)
        if extra:
            pairs.update(extra)
        if not pairs:
            return None
        return "; ".join(f"{k}={v}" for k, v in pairs.items())


def cookiejar_from_dict(d: Mapping[str, str] | None) -> RequestsCookieJar:
    jar = RequestsCookieJar()
    if d:
        for k, v in d.items():
            jar.set(k, v)
    return jar
