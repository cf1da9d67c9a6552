"""Prometheus metrics with the monorepo's shared names and buckets.

* ``http_server_request_duration_seconds{service, route, method, status_class}`` - every request;
  ``route`` is the route template (``<unmatched>`` for 404/405), never the raw path.
* ``perfkit_hotpath_duration_seconds{service, hotpath}`` - ``route_match``, ``di_scope``, ``handler``,
  ``serialize``; timed on one request in ``sample_every`` only, so the timing calls cost nothing on the
  other requests.

Cheap recording: a request adds 1 to a plain Python list slot (``bisect`` over the bucket bounds) -
no lock, no label lookup.  The local counts are flushed into prometheus-client's histograms once a
second (and before every scrape), which in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set, several
workers) writes them to the per-process files that the ``/metrics`` handler merges.
"""
from __future__ import annotations

import asyncio
import os
from bisect import bisect_left

__all__ = ["BUCKETS", "Metrics", "metrics_response"]

BUCKETS = (0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
           0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_NB = len(BUCKETS) + 1  # + the +Inf bucket
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_STATUS_CLASS = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    def __init__(self, service: str = "aquilia_app", *, sample_every: int = 64, registry=None):
        import prometheus_client as pc

        if sample_every < 1 or sample_every & (sample_every - 1):
            raise ValueError("sample_every must be a power of two")
        self.service = service
        self.sample_mask = sample_every - 1
        self.registry = registry if registry is not None else pc.CollectorRegistry(auto_describe=True)
        self._pc = pc
        self.requests = pc.Histogram(
            "http_server_request_duration_seconds", "HTTP server request duration in seconds",
            ["service", "route", "method", "status_class"], buckets=BUCKETS, registry=self.registry)
        self.hotpaths = pc.Histogram(
            "perfkit_hotpath_duration_seconds", "Duration of sampled hot paths in seconds",
            ["service", "hotpath"], buckets=BUCKETS, registry=self.registry)
        self._req_acc: dict = {}  # (route, method, status//100) -> [counts..., sum]
        self._hot_acc: dict = {}  # hotpath -> [counts..., sum]
        self._task = None

    # -- recording (hot) --------------------------------------------------------------------
    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status // 100)
        acc = self._req_acc.get(key)
        if acc is None:
            acc = self._req_acc[key] = [0] * _NB + [0.0]
        acc[bisect_left(BUCKETS, seconds)] += 1
        acc[_NB] += seconds

    def observe_hot(self, hotpath: str, seconds: float) -> None:
        acc = self._hot_acc.get(hotpath)
        if acc is None:
            acc = self._hot_acc[hotpath] = [0] * _NB + [0.0]
        acc[bisect_left(BUCKETS, seconds)] += 1
        acc[_NB] += seconds

    # -- flushing ---------------------------------------------------------------------------
    def flush(self) -> None:
        req, self._req_acc = self._req_acc, {}
        for (route, method, sc), acc in req.items():
            child = self.requests.labels(self.service, route, method if method in _KNOWN_METHODS else "OTHER",
                                         _STATUS_CLASS.get(sc, "other"))
            _merge(child, acc)
        hot, self._hot_acc = self._hot_acc, {}
        for name, acc in hot.items():
            _merge(self.hotpaths.labels(self.service, name), acc)

    async def _flusher(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            self.flush()

    def start(self, period: float = 1.0) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flusher(period))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self.flush()

    # -- exposition -------------------------------------------------------------------------
    def exposition(self) -> tuple[bytes, str]:
        """The text exposition of every worker (multiprocess) or of this process."""
        self.flush()
        pc = self._pc
        mdir = multiprocess_dir()
        if mdir:
            from prometheus_client import multiprocess

            reg = pc.CollectorRegistry()
            multiprocess.MultiProcessCollector(reg, path=mdir)
            return pc.generate_latest(reg), pc.CONTENT_TYPE_LATEST
        return pc.generate_latest(self.registry), pc.CONTENT_TYPE_LATEST


def _merge(child, acc: list) -> None:
    buckets = child._buckets
    for i in range(_NB):
        n = acc[i]
        if n:
            buckets[i].inc(n)
    child._sum.inc(acc[_NB])


def metrics_response(metrics: Metrics):
    from .responses import Response

    body, ctype = metrics.exposition()
    return Response(body, 200, None, ctype)
