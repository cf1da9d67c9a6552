"""A registry of perfkit families: creation, flushing and the exposition (text or OpenMetrics, multi-process)."""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Sequence

from .families import Counter, Gauge, Histogram
from .labels import LATENCY_BUCKETS
from .standard import ClientRequests, HotPaths, ServerRequests

__all__ = ["Registry", "multiprocess_dir"]

pc = None  # prometheus_client, imported by the first Registry (see _prometheus_client)


def _prometheus_client():
    """prometheus-client picks its value storage (in memory, or the multi-process files when
    PROMETHEUS_MULTIPROC_DIR is set) once, when it is imported: so it is imported when the first Registry is made,
    not with this package, and a server may set the variable after importing its app, before its workers start."""
    global pc
    if pc is None:
        import prometheus_client

        # SPEC.md: no _created series (a per-process timestamp no dashboard reads; D and Rust have none).
        prometheus_client.disable_created_metrics()
        pc = prometheus_client
    return pc


def multiprocess_dir() -> str | None:
    """The directory of prometheus-client's multi-process mode, if this process runs in it."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class _FlushFirst:
    """Registered first, so that any collection of the registry (exposition, a pushgateway, prometheus-client's
    own HTTP server) sees the counts recorded since the last flush."""

    def __init__(self, registry: "Registry"):
        self.registry = registry

    def describe(self):  # no metrics of its own (and no flush when it is registered)
        return []

    def collect(self):
        self.registry.flush()
        return []


class Registry:
    def __init__(self):
        _prometheus_client()
        self.prometheus = pc.CollectorRegistry(auto_describe=True)
        self.prometheus.register(_FlushFirst(self))
        self._families: dict = {}
        self._task: asyncio.Task | None = None
        self._thread_stop: threading.Event | None = None

    # -- families ---------------------------------------------------------------------------------------------
    # Asking twice for a family by the same name and kind returns the first one (the standard families of two
    # services in one process share their histogram; the first request decides whether it is thread-safe); a
    # different kind or label set is an error.
    def histogram(self, name: str, help: str, labelnames: Sequence[str] = (), *,
                  buckets: Sequence[float] = LATENCY_BUCKETS, labels_of=None, threadsafe: bool = False,
                  lock=None) -> Histogram:
        return self._family(Histogram, name, labelnames, lambda: Histogram(
            pc.Histogram(name, help, labelnames, buckets=buckets, registry=self.prometheus),
            buckets, labels_of, threadsafe, lock))

    def counter(self, name: str, help: str, labelnames: Sequence[str] = (), *, labels_of=None,
                threadsafe: bool = False) -> Counter:
        return self._family(Counter, name.removesuffix("_total"), labelnames, lambda: Counter(
            pc.Counter(name, help, labelnames, registry=self.prometheus), labels_of, threadsafe))

    def gauge(self, name: str, help: str, labelnames: Sequence[str] = (), *,
              multiprocess_mode: str = "livesum") -> Gauge:
        return self._family(Gauge, name, labelnames, lambda: Gauge(
            pc.Gauge(name, help, labelnames, registry=self.prometheus, multiprocess_mode=multiprocess_mode)))

    def http_server(self, service: str, *, threadsafe: bool = False) -> ServerRequests:
        return ServerRequests(self, service, threadsafe)

    def hotpaths(self, service: str, sample_every: int = 64, *, threadsafe: bool = False) -> HotPaths:
        return HotPaths(self, service, sample_every, threadsafe)

    def http_client(self, service: str) -> ClientRequests:
        return ClientRequests(self, service)

    def _family(self, kind, name: str, labelnames: Sequence[str], create):
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = create()
        elif type(family) is not kind or tuple(family.metric._labelnames) != tuple(labelnames):
            raise ValueError(f"metric {name!r} exists with another kind or label set")
        return family

    # -- flushing ---------------------------------------------------------------------------------------------
    def flush(self) -> None:
        for family in self._families.values():
            family.flush()

    def start(self, period: float = 1.0) -> None:
        """Flush every ``period`` seconds from the running asyncio loop (multi-process files stay current)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush_every(period))

    async def _flush_every(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            self.flush()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self.flush()

    def start_thread(self, period: float = 1.0) -> None:
        """``start`` for programs without an event loop: a daemon thread flushes (thread-safe families only)."""
        if self._thread_stop is None:
            self._thread_stop = stop = threading.Event()

            def run():
                while not stop.wait(period):
                    self.flush()

            threading.Thread(target=run, name="perfkit-metrics-flush", daemon=True).start()

    def stop_thread(self) -> None:
        if self._thread_stop is not None:
            self._thread_stop.set()
            self._thread_stop = None
        self.flush()

    # -- exposition -------------------------------------------------------------------------------------------
    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The body and content type for a scrape: OpenMetrics when ``accept`` asks for it, else text 0.0.4.
        In multi-process mode every worker's files are merged (this worker's counts flushed first)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        mdir = multiprocess_dir()
        if mdir:
            from prometheus_client import multiprocess

            self.flush()
            merged = pc.CollectorRegistry()
            multiprocess.MultiProcessCollector(merged, path=mdir)
            return encoder(merged), content_type
        return encoder(self.prometheus), content_type

    def asgi_app(self):
        """A minimal ASGI app that answers every HTTP request with the exposition."""
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            accept = dict(scope.get("headers") or ()).get(b"accept", b"").decode("latin-1")
            body, ctype = self.exposition(accept)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        return app
