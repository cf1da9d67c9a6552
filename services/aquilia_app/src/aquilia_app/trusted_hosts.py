"""Trusted hosts, as native middleware: a request whose ``Host`` is not one of the app's names gets a
400 problem before any routing, so absolute URLs built from ``Host`` (redirects, password-reset
links) cannot be pointed at another site (Host header injection, cache poisoning).

Patterns: an exact name (``example.com``), a wildcard for the subdomains (``*.example.com``: not
the name itself; list both for both), an IP literal (``127.0.0.1``, ``[::1]``) or ``*`` (any).
Ports are ignored, names compare case-insensitively and without a final dot.  A request with no
Host, two Hosts (RFC 9112 3.2: a 400) or a malformed one is refused.

``www_redirect=True``: a request for ``example.com`` when only ``www.example.com`` is allowed is
redirected there (301 for GET/HEAD, 308 otherwise, keeping path, query and port).
"""
from __future__ import annotations

import re
from typing import Iterable

from .exceptions import HTTPException
from .middleware import Middleware
from .responses import Response, problem
from .routing import encode_path

__all__ = ["TrustedHostMiddleware", "split_host"]

_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\Z")
_IPV6 = re.compile(r"\[[0-9a-f:.]+\]\Z")  # the bracketed literal of a Host header (RFC 3986 IP-literal)


def split_host(value: str) -> tuple[str, str] | None:
    """``(host, ":port" or "")`` from a Host header value, lower case and without a final dot; None
    when it is not a host name, IPv4 or bracketed IPv6 literal with an optional numeric port."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[:end + 1], value[end + 1:]
        if end < 0 or not _IPV6.match(host):
            return None
    else:
        host, colon, port = value.partition(":")
        rest = colon + port
        host = host[:-1] if host.endswith(".") else host
        if not _NAME.match(host):
            return None
    if rest and not (rest[0] == ":" and rest[1:].isdigit() and rest[1:].isascii() and len(rest) <= 6):
        return None
    return host, rest


def _pattern(p: str) -> str:
    if not isinstance(p, str):
        raise TypeError(f"allowed_hosts: {p!r} is not a str")
    low = p.strip().lower()
    if low == "*":
        return low
    name = low[2:] if low.startswith("*.") else low
    parsed = split_host(name)
    if parsed is None or parsed[1] or (low.startswith("*.") and name.startswith("[")):
        raise ValueError(f"allowed_hosts: {p!r} is not a host name, '*.domain', an IP literal or '*' "
                         "(no scheme, port or path)")
    return ("*." if low.startswith("*.") else "") + parsed[0]


class TrustedHostMiddleware(Middleware):
    """See the module docstring."""

    def __init__(self, allowed_hosts: Iterable[str], www_redirect: bool = False):
        if isinstance(allowed_hosts, str):
            raise TypeError(f"allowed_hosts is a list of host patterns, not the string {allowed_hosts!r}")
        patterns = [_pattern(p) for p in allowed_hosts]
        if not patterns:
            raise ValueError("allowed_hosts is empty: every request would be refused")
        self.any = "*" in patterns
        self.exact = frozenset(p for p in patterns if not p.startswith("*."))
        self.suffixes = tuple(p[1:] for p in patterns if p.startswith("*."))  # ".example.com"
        self.www_redirect = bool(www_redirect)

    def allowed(self, host: str) -> bool:
        return self.any or host in self.exact or (bool(self.suffixes) and host.endswith(self.suffixes))

    @staticmethod
    def _host(request):
        """``(host, ":port" or "")`` of the request's one Host, or None."""
        hosts = request.headers.getall("host")
        if not hosts:  # HTTP/2 over RSGI: the authority pseudo-header instead
            authority = getattr(getattr(request, "rsgi_scope", None), "authority", None)
            hosts = [authority] if authority else hosts
        return split_host(hosts[0]) if len(hosts) == 1 else None

    async def websocket(self, ws) -> None:
        """A WebSocket handshake for another host is refused (400) too, as in Starlette."""
        if not self.any:
            parsed = self._host(ws)
            if parsed is None or not self.allowed(parsed[0]):
                raise HTTPException(400, "Invalid host header")

    async def __call__(self, request, call_next):
        if self.any:
            return await call_next(request)
        parsed = self._host(request)
        if parsed is not None:
            host, port = parsed
            if self.allowed(host):
                return await call_next(request)
            if self.www_redirect and not host.startswith("www.") and self.allowed("www." + host):
                return _redirect(request, "www." + host + port)
        return problem(400, "Bad Request", "Invalid host header")


def _redirect(request, authority: str) -> Response:
    scope = request.scope  # ASGI-shaped on both front ends: only on this rare path
    query = request.query_string  # text as every front end reads it (Request._raw_query)
    # the path re-encoded: a decoded "%3F" or "%25" in it must not become a query or an escape
    url = f"{scope.get('scheme', 'http')}://{authority}{encode_path(request.path)}"
    if query:
        url += "?" + query
    return Response.redirect(url, 301 if request.method in ("GET", "HEAD") else 308)
