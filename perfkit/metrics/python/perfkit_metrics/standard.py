"""The standard families of SPEC.md: server requests, sampled hot paths, client requests and their stages."""
from __future__ import annotations

from bisect import bisect_left

from .labels import method_label, status_class

__all__ = ["SERVER", "HOTPATH", "CLIENT", "CLIENT_STAGE", "STAGES", "ServerRequests", "HotPaths",
           "ClientRequests"]

# (name, help, label names)
SERVER = ("http_server_request_duration_seconds", "HTTP server request duration in seconds",
          ("service", "route", "method", "status_class"))
HOTPATH = ("perfkit_hotpath_duration_seconds", "Duration of sampled hot paths in seconds", ("service", "hotpath"))
CLIENT = ("http_client_request_duration_seconds", "HTTP client request duration in seconds",
          ("service", "method", "host", "status_class"))
CLIENT_STAGE = ("http_client_stage_duration_seconds", "HTTP client request stage duration in seconds",
                ("service", "stage"))
STAGES = ("pool_wait", "connect", "tls", "ttfb", "transfer", "decode")


# Keys hold the raw values (with the service first, so several services can share one registry); these turn
# them into the exposed label values at flush time, off the request path.
def _server_labels(key: tuple) -> tuple:
    service, route, method, status = key
    return service, route, method_label(method), status_class(status)


def _client_labels(key: tuple) -> tuple:
    service, method, host, status = key
    return service, method_label(method), host, status_class(status)


class ServerRequests:
    """``http_server_request_duration_seconds``: call ``observe`` once per request with the route template.
    ``threadsafe=True`` for a server that handles requests on several threads."""

    def __init__(self, registry, service: str, threadsafe: bool = False):
        self.service = service
        self._h = h = registry.histogram(*SERVER, labels_of=_server_labels, threadsafe=threadsafe)
        if h.lock is not None:
            self.observe = lambda route, method, status, seconds: h.observe((service, route, method, status), seconds)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        # Histogram.record inlined: the one call per request of every server, a Python call less (~60 ns)
        h = self._h
        key = (self.service, route, method, status)
        acc = h._acc.get(key)
        if acc is None:
            acc = h._acc[key] = [0] * h.slots + [0.0]
        acc[bisect_left(h.bounds, seconds)] += 1
        acc[-1] += seconds


class HotPaths:
    """``perfkit_hotpath_duration_seconds``, timed on one call in ``sample_every``.

    The caller keeps its own counter and times a call when ``not (n & hot.sample_mask)``, so the calls that are
    not sampled pay one integer test; ``sampled()`` is the same test with a counter kept here.
    """

    def __init__(self, registry, service: str, sample_every: int = 64, threadsafe: bool = False):
        if sample_every < 1 or sample_every & (sample_every - 1):
            raise ValueError("sample_every must be a power of two")
        self.service = service
        self.sample_mask = sample_every - 1
        self._n = 0
        self._observe = registry.histogram(*HOTPATH, threadsafe=threadsafe).observe

    def sampled(self) -> bool:
        self._n = n = self._n + 1
        return not (n & self.sample_mask)

    def observe(self, hotpath: str, seconds: float) -> None:
        self._observe((self.service, hotpath), seconds)


class ClientRequests:
    """``http_client_request_duration_seconds`` and ``http_client_stage_duration_seconds`` (thread-safe: both
    families share one lock, so ``observe_request`` records a request and its stages under one acquisition)."""

    def __init__(self, registry, service: str):
        self.service = service
        self._requests = registry.histogram(*CLIENT, labels_of=_client_labels, threadsafe=True)
        self._lock = self._requests.lock
        self._stages = registry.histogram(*CLIENT_STAGE, lock=self._lock)
        self._stage_keys = tuple((service, name) for name in STAGES)

    def observe(self, method: str, host: str, status: int, seconds: float) -> None:
        """One request: ``host`` as ``host:port`` (``labels.host_label(url)``), status 0 when no response came."""
        with self._lock:
            self._requests.record((self.service, method, host, status), seconds)

    def stage(self, stage: str, seconds: float) -> None:
        with self._lock:
            self._stages.record((self.service, stage), seconds)

    def observe_request(self, method: str, host: str, status: int, seconds: float, stages=None) -> None:
        """``observe`` and the stages at once; ``stages`` in ``STAGES`` order, None for a stage not seen."""
        with self._lock:
            self._requests.record((self.service, method, host, status), seconds)
            if stages is not None:
                record = self._stages.record
                for key, value in zip(self._stage_keys, stages):
                    if value is not None:
                        record(key, value)
