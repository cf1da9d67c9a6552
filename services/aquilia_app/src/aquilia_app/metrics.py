"""aquilia_app's instrumentation: the perfkit metrics library's standard families (perfkit/metrics/SPEC.md).

* ``http_server_request_duration_seconds{service, route, method, status_class}`` - every request; ``route`` is
  the route template (``<unmatched>`` for 404/405), never the raw path.
* ``perfkit_hotpath_duration_seconds{service, hotpath}`` - ``route_match``, ``di_scope``, ``handler``,
  ``serialize``; timed on one request in ``sample_every`` (the app keeps the counter: ``n & sample_mask``).

Recording is the library's cheap path (a list slot per request, flushed once a second and before each scrape);
with several workers (``PROMETHEUS_MULTIPROC_DIR`` set) ``/metrics`` merges every worker's files.
"""
from __future__ import annotations

from perfkit_metrics import Registry

__all__ = ["Metrics", "metrics_response"]


class Metrics:
    def __init__(self, service: str = "aquilia_app", *, sample_every: int = 64):
        self.registry = Registry()
        hot = self.registry.hotpaths(service, sample_every)
        self.observe_request = self.registry.http_server(service).observe
        self.observe_hot = hot.observe
        self.sample_mask = hot.sample_mask
        self.start = self.registry.start
        self.stop = self.registry.stop
        self.exposition = self.registry.exposition


def metrics_response(metrics: Metrics, accept: str | None = None):
    from .responses import Response

    body, ctype = metrics.exposition(accept)
    return Response(body, 200, None, ctype)
