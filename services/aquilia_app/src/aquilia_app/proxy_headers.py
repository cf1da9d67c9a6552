"""The client and scheme a reverse proxy forwards, as native middleware (uvicorn's ``--proxy-headers``, on
both front ends: granian's RSGI has no such option).

Behind nginx or a load balancer the server's peer is the proxy, and the request reached the proxy over
https.  When the peer is one of ``trusted_proxies`` (IP addresses or networks; ``"*"`` trusts any peer),
``X-Forwarded-For`` gives the client and ``X-Forwarded-Proto`` the scheme, so ``request.client``, the URLs
the app builds (``url``, ``url_for``, redirects) and the ``Secure`` choices see what the browser sees.

``X-Forwarded-For`` is a list that each proxy appends to: the client is its rightmost address that is
not a trusted proxy (a client can put anything at the left; only the trusted proxies' entries count).
A peer that is not trusted has its headers ignored.  The port of a forwarded client is unknown (None).
"""
from __future__ import annotations

import ipaddress
from typing import Iterable

from .middleware import Middleware

__all__ = ["ProxyHeadersMiddleware"]

_SCHEMES = frozenset(("http", "https", "ws", "wss"))


def _networks(trusted: Iterable[str]) -> tuple | None:
    """The trusted peers as networks; None for ``"*"`` (every peer)."""
    if isinstance(trusted, str):
        trusted = [p.strip() for p in trusted.split(",")]  # uvicorn's --forwarded-allow-ips form
    out = []
    for p in trusted:
        if p == "*":
            return None
        try:
            out.append(ipaddress.ip_network(p, strict=False))
        except ValueError:
            raise ValueError(f"trusted_proxies: {p!r} is not an IP address, a network (10.0.0.0/8) or '*'") from None
    return tuple(out)


class ProxyHeadersMiddleware(Middleware):
    def __init__(self, trusted_proxies: Iterable[str] | str = ("127.0.0.1", "::1")):
        self.networks = _networks(trusted_proxies)

    def trusts(self, host: str) -> bool:
        if self.networks is None:
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:  # not an IP: a Unix socket's name, a test client
            return False
        return any(ip in net for net in self.networks)

    def forwarded_client(self, header: str) -> str | None:
        """The rightmost address of ``X-Forwarded-For`` that is not a trusted proxy (else the leftmost)."""
        hops = [h.strip() for h in header.split(",") if h.strip()]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        return hops[0] if hops else None

    async def websocket(self, ws) -> None:
        """The same for a WebSocket (its scheme ``ws``/``wss``), as uvicorn's proxy headers do."""
        self._apply(ws, {"http": "ws", "https": "wss"})

    async def __call__(self, request, call_next):
        self._apply(request)
        return await call_next(request)

    def _apply(self, request, schemes=None) -> None:
        peer = request.client
        if peer is not None and self.trusts(peer.host):
            scope = request.scope  # the ASGI-shaped scope: what client, url and url_for read
            headers = request.headers  # repeated header lines joined with ", "
            proto = headers.get("x-forwarded-proto")
            if proto:
                proto = proto.rpartition(",")[2].strip().lower()  # the last proxy's word
                if proto in _SCHEMES:
                    scope["scheme"] = schemes.get(proto, proto) if schemes else proto
            forwarded = headers.get("x-forwarded-for")
            client = self.forwarded_client(forwarded) if forwarded else None
            if client:
                scope["client"] = (client, None)
