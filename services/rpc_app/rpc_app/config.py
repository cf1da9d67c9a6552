"""What both standalone servers share: their settings, the origin check and the connection limits."""

from __future__ import annotations

import ssl as _ssl
from dataclasses import dataclass, field

from .limits import Limits


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8082
    limits: Limits = field(default_factory=Limits)
    max_in_flight: int = 64              # calls running at once per connection
    compression: bool = True
    compress_min_bytes: int = 1024
    fragment_bytes: int = 64 * 1024
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    close_timeout: float = 5.0
    max_queue: int = 16
    write_limit: int = 64 * 1024
    send_timeout: float = 10.0           # drop a client that leaves a write blocked this long
    compress_level: int = 1
    metrics_path: str = "/metrics"
    # Browsers send Origin on every WebSocket handshake and let any site open one to any server (cross-site
    # WebSocket hijacking). A handshake with an Origin is accepted when that origin is listed here ("*": any),
    # or, with None (the default), when the Origin names the host the client connected to (the Host header).
    # No Origin (a non-browser client): accepted. Refused: 403.
    allowed_origins: tuple[str, ...] | None = None
    max_connections: int = 10_000        # open WebSocket connections, in all
    # open WebSocket connections from one client address; 0 = no limit (the default: behind a reverse proxy
    # every client has the proxy's address)
    max_connections_per_ip: int = 0
    assembly_timeout: float = 10.0       # a fragmented message must be complete within this (close 1008)
    max_push_queue: int = 1024           # broadcast messages queued per subscriber before it is dropped
    shutdown_grace: float = 10.0         # on stop: how long calls in flight may run on
    ssl: _ssl.SSLContext | None = None   # serve wss:// with this context

    def __post_init__(self):
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        for name in ("max_connections", "max_push_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.max_connections_per_ip < 0:
            raise ValueError("max_connections_per_ip must be >= 0 (0: no limit)")
        for name in ("assembly_timeout", "send_timeout", "shutdown_grace"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.allowed_origins is not None:
            self.allowed_origins = tuple(o.rstrip("/").lower() for o in self.allowed_origins)

    @property
    def scheme(self) -> str:
        return "wss" if self.ssl is not None else "ws"

    def origin_allowed(self, origin: str | None, host: str | None = None) -> bool:
        """A handshake without Origin comes from a non-browser client and is let through."""
        if origin is None:
            return True
        origin = origin.rstrip("/").lower()
        if self.allowed_origins is None:  # same host only
            return host is not None and origin.split("://", 1)[-1] == host.strip().lower()
        return origin in self.allowed_origins or "*" in self.allowed_origins


def tls_context(certfile: str, keyfile: str | None = None) -> _ssl.SSLContext:
    ctx = _ssl.create_default_context(_ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


class ConnectionCounter:
    """Open connections in all and per client address, against the configured maxima."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.total = 0
        self.by_ip: dict[str, int] = {}

    def refusal(self, ip: str | None) -> str | None:
        """Why a new connection from ``ip`` must be refused, or None."""
        if self.total >= self.config.max_connections:
            return "too many connections"
        per_ip = self.config.max_connections_per_ip
        if per_ip and ip is not None and self.by_ip.get(ip, 0) >= per_ip:
            return "too many connections from this address"
        return None

    def opened(self, ip: str | None) -> None:
        self.total += 1
        if ip is not None:
            self.by_ip[ip] = self.by_ip.get(ip, 0) + 1

    def closed(self, ip: str | None) -> None:
        self.total -= 1
        if ip is not None:
            n = self.by_ip.get(ip, 1) - 1
            if n:
                self.by_ip[ip] = n
            else:
                self.by_ip.pop(ip, None)
