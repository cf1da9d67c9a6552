"""Prometheus metrics with the names of the monorepo's DESIGN.md.

* ``perfkit_hotpath_duration_seconds{service="rpc_app",hotpath=parse|validate|dispatch|encode}``
  (sampled: one call in ``sample_every`` is timed stage by stage).
* ``rpc_calls_total{service,method,outcome}``: counted in plain ints on the hot path and
  turned into a counter family at scrape time (no lock, no label lookup per call).
* ``rpc_in_flight{service}`` (calls running asynchronously; a plain int too), ``rpc_open_connections{service}``.
* ``rpc_connections_total``, ``rpc_closed_connections_total{reason}``.

Each ``Metrics`` owns its CollectorRegistry, so several engines can live in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

SERVICE = "rpc_app"
# One bucket layout for all latency histograms: 25 µs ... 10 s.
LATENCY_BUCKETS = (25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
                   25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _CallsCollector:
    def __init__(self, metrics: "Metrics"):
        self.metrics = metrics

    def collect(self):
        fam = CounterMetricFamily("rpc_calls", "JSON-RPC calls by method and outcome",
                                  labels=["service", "method", "outcome"])
        for (method, outcome), n in self.metrics.snapshot_calls().items():
            fam.add_metric([SERVICE, method, outcome], n)
        yield fam
        g = GaugeMetricFamily("rpc_in_flight", "JSON-RPC calls in flight (async)", labels=["service"])
        g.add_metric([SERVICE], sum(e.in_flight for e in self.metrics.engines))
        yield g


class Metrics:
    def __init__(self, sample_every: int = 64):
        if sample_every < 1 or sample_every & (sample_every - 1):
            raise ValueError("sample_every must be a power of two")
        self.sample_mask = sample_every - 1
        self.registry = CollectorRegistry(auto_describe=True)
        self.engines: list = []
        hot = Histogram("perfkit_hotpath_duration_seconds", "Time spent in a hot path (sampled)",
                        ["service", "hotpath"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.h_parse = hot.labels(SERVICE, "parse")
        self.h_validate = hot.labels(SERVICE, "validate")
        self.h_dispatch = hot.labels(SERVICE, "dispatch")
        self.h_encode = hot.labels(SERVICE, "encode")
        self.open_connections = Gauge("rpc_open_connections", "Open JSON-RPC connections", ["service"],
                                      registry=self.registry).labels(SERVICE)
        self.connections_total = Counter("rpc_connections", "Accepted JSON-RPC connections", ["service"],
                                         registry=self.registry).labels(SERVICE)
        self._closed = Counter("rpc_closed_connections", "Closed connections by reason",
                               ["service", "reason"], registry=self.registry)
        self.registry.register(_CallsCollector(self))

    def closed(self, reason: str) -> None:
        self._closed.labels(SERVICE, reason).inc()

    def attach(self, engine) -> None:
        self.engines.append(engine)

    def snapshot_calls(self) -> dict:
        out: dict = {}
        for eng in self.engines:
            for key, n in eng.call_counts().items():
                out[key] = out.get(key, 0) + n
        return out

    def render(self) -> bytes:
        return generate_latest(self.registry)
