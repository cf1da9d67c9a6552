"""rpc_app's instrumentation, on the perfkit metrics library (perfkit/metrics/SPEC.md).

* ``perfkit_hotpath_duration_seconds{service="rpc_app",hotpath=parse|validate|dispatch|encode}`` (sampled: one
  call in ``sample_every`` is timed stage by stage).
* ``rpc_call_duration_seconds{service,method}``: every call of a registered method, from the engine starting it
  (after validation) to its result or error — waiting for a slot, middleware, a thread hop and the method itself.
* ``rpc_calls_total{service,method,outcome}``: counted in plain ints by the engines and turned into a counter
  family at scrape time (no lock, no label lookup per call).
* ``rpc_in_flight{service}`` (calls running asynchronously; a plain int too), ``rpc_open_connections{service}``.
* ``rpc_connections_total``, ``rpc_closed_connections_total{reason}``.

Each ``Metrics`` owns its registry, so several engines can live in one process.
"""

from __future__ import annotations

from perfkit_metrics import Registry

SERVICE = "rpc_app"


class _CallsCollector:
    def __init__(self, metrics: "Metrics"):
        self.metrics = metrics

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        fam = CounterMetricFamily("rpc_calls", "JSON-RPC calls by method and outcome",
                                  labels=["service", "method", "outcome"])
        for (method, outcome), n in self.metrics.snapshot_calls().items():
            fam.add_metric([SERVICE, method, outcome], n)
        yield fam
        g = GaugeMetricFamily("rpc_in_flight", "JSON-RPC calls in flight (async)", labels=["service"])
        g.add_metric([SERVICE], sum(e.in_flight for e in self.metrics.engines))
        yield g


def _call_labels(key: tuple) -> tuple:
    return SERVICE, key[0]


class Metrics:
    def __init__(self, sample_every: int = 64):
        self.registry = Registry()
        self.engines: list = []
        hot = self.registry.hotpaths(SERVICE, sample_every)
        self.sample_mask = hot.sample_mask
        self.observe_hot = hot.observe
        self._calls = self.registry.histogram(
            "rpc_call_duration_seconds", "JSON-RPC call duration in seconds, by method",
            ("service", "method"), labels_of=_call_labels)
        self.open_connections = self.registry.gauge(
            "rpc_open_connections", "Open JSON-RPC connections", ("service",)).metric.labels(SERVICE)
        self.connections_total = self.registry.counter(
            "rpc_connections", "Accepted JSON-RPC connections", ("service",)).metric.labels(SERVICE)
        self._closed = self.registry.counter(
            "rpc_closed_connections", "Closed connections by reason", ("service", "reason")).metric
        self.registry.prometheus.register(_CallsCollector(self))

    def call_timer(self, method: str):
        """``observe(seconds)`` of one method's ``rpc_call_duration_seconds`` series (resolved once per method)."""
        return self._calls.child((method,)).observe

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

    def render(self, accept: str | None = None) -> bytes:
        return self.exposition(accept)[0]

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The body and its content type: OpenMetrics when ``accept`` asks for it."""
        return self.registry.exposition(accept)
