"""The label values of the standard families (SPEC.md): bucket layout, method, status class, host."""
from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["LATENCY_BUCKETS", "method_label", "status_class", "host_label"]

#: One layout for every latency histogram, in seconds: 25 µs … 10 s (then +Inf).
LATENCY_BUCKETS = (0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
_CLASSES = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def method_label(method: str) -> str:
    """The method as given when it is one of RFC 9110's nine, else ``OTHER`` (no series per hostile method)."""
    return method if method in _METHODS else "OTHER"


def status_class(status: int) -> str:
    """``1xx`` … ``5xx``; ``error`` for 0 (no response); ``other`` for anything else."""
    if status == 0:
        return "error"
    if 100 <= status <= 599:
        return _CLASSES[status // 100]
    return "other"


def host_label(url: str) -> str:
    """``host:port`` of a URL, the port always written (IPv6 hosts in brackets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = _DEFAULT_PORTS.get(parts.scheme.lower(), 0)
    return f"{host}:{port}"
