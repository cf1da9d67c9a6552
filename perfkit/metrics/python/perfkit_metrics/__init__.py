"""perfkit metrics for Python: the kit's uniform Prometheus instrumentation (names, labels, buckets: SPEC.md).

    from perfkit_metrics import Registry
    metrics = Registry()
    server = metrics.http_server("my_service")
    server.observe("/items/{id}", "GET", 200, 0.0012)
    body, content_type = metrics.exposition(accept_header)
"""
from .families import Counter, Gauge, Histogram
from .labels import LATENCY_BUCKETS, host_label, method_label, status_class
from .registry import Registry, multiprocess_dir
from .standard import STAGES, ClientRequests, HotPaths, ServerRequests

__all__ = ["Registry", "Histogram", "Counter", "Gauge", "ServerRequests", "HotPaths", "ClientRequests", "STAGES",
           "LATENCY_BUCKETS", "method_label", "status_class", "host_label", "multiprocess_dir"]
