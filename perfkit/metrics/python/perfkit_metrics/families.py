"""Metric families with a cheap recording path in front of prometheus-client.

Recording adds to a plain Python list (``bisect`` over the bucket bounds for histograms) keyed by the raw label
values — no lock, no label lookup, no normalisation per call. ``flush()`` moves the accumulated counts into
prometheus-client's metrics, which own the exposition and, with ``PROMETHEUS_MULTIPROC_DIR`` set, the per-process
files that multi-worker aggregation reads. The registry flushes before every scrape and (``start``) once a second.

With ``threadsafe=True`` a lock guards recording and flushing, for families fed from several threads (a client);
an asyncio service records and flushes on one thread and needs none.
"""
from __future__ import annotations

import threading
from bisect import bisect_left
from typing import Callable, Sequence

from .labels import LATENCY_BUCKETS

__all__ = ["Histogram", "HistogramChild", "Counter", "Gauge"]


class _Family:
    """Accumulates by key; ``labels_of(key)`` turns a key into the exposed label values at flush time."""

    def __init__(self, metric, labels_of: Callable[[tuple], Sequence[str]] | None, threadsafe: bool, lock=None):
        self.metric = metric
        self._labels_of = labels_of
        self._acc: dict = {}
        #: held around recording and flushing when thread-safe (families recorded together may share one)
        self.lock = lock if lock is not None else threading.Lock() if threadsafe else None

    def _child(self, key: tuple):
        values = self._labels_of(key) if self._labels_of is not None else key
        return self.metric.labels(*values) if values else self.metric

    def flush(self) -> None:
        if self.lock is None:
            acc, self._acc = self._acc, {}
        else:
            with self.lock:
                acc, self._acc = self._acc, {}
        for key, value in acc.items():
            self._merge(self._child(key), value)


class Histogram(_Family):
    def __init__(self, metric, buckets: Sequence[float] = LATENCY_BUCKETS, labels_of=None, threadsafe=False,
                 lock=None):
        super().__init__(metric, labels_of, threadsafe, lock)
        self.bounds = tuple(buckets)
        self.slots = len(self.bounds) + 1  # the buckets, +Inf last; then the sum
        self.observe = self.record if self.lock is None else self._observe_locked
        self._children: dict = {}  # key -> the slot list of a HistogramChild (flushed in place)

    def child(self, key: tuple) -> "HistogramChild":
        """The series of one key, resolved once: its ``observe(seconds)`` skips the key's tuple and dict lookup."""
        acc = self._children.get(key)
        if acc is None:
            acc = self._children[key] = [0] * self.slots + [0.0]
        return HistogramChild(self, acc)

    def flush(self) -> None:
        super().flush()
        if self.lock is None:
            self._flush_children()
        else:
            with self.lock:
                self._flush_children()

    def _flush_children(self) -> None:
        for key, acc in self._children.items():
            if any(acc):
                counts, acc[:] = acc[:], [0] * self.slots + [0.0]
                self._merge(self._child(key), counts)

    def record(self, key: tuple, seconds: float) -> None:
        """``observe`` without the lock: for a caller that holds ``lock`` already."""
        acc = self._acc.get(key)
        if acc is None:
            acc = self._acc[key] = [0] * self.slots + [0.0]
        acc[bisect_left(self.bounds, seconds)] += 1
        acc[-1] += seconds

    def _observe_locked(self, key: tuple, seconds: float) -> None:
        with self.lock:
            self.record(key, seconds)

    def _merge(self, child, acc: list) -> None:
        # prometheus-client has no call that adds n observations to a bucket: its internals _buckets and _sum are
        # used, and //perfkit/metrics:python_test reads the counts back through the exposition, so a change of
        # the dependency fails it loudly.
        buckets = child._buckets
        for i in range(self.slots):
            if acc[i]:
                buckets[i].inc(acc[i])
        child._sum.inc(acc[-1])


class HistogramChild:
    __slots__ = ("observe",)

    def __init__(self, family: Histogram, acc: list):
        bounds, lock = family.bounds, family.lock

        def observe(seconds: float) -> None:
            acc[bisect_left(bounds, seconds)] += 1
            acc[-1] += seconds

        def observe_locked(seconds: float) -> None:
            with lock:
                observe(seconds)

        self.observe = observe if lock is None else observe_locked


class Counter(_Family):
    def __init__(self, metric, labels_of=None, threadsafe=False):
        super().__init__(metric, labels_of, threadsafe)
        if threadsafe:
            self.inc = self._inc_locked

    def inc(self, key: tuple = (), amount: float = 1) -> None:
        self._acc[key] = self._acc.get(key, 0) + amount

    def _inc_locked(self, key: tuple = (), amount: float = 1) -> None:
        with self.lock:
            Counter.inc(self, key, amount)

    def _merge(self, child, amount) -> None:
        child.inc(amount)


class Gauge:
    """Set, add and read directly (gauges are not on a per-request path)."""

    def __init__(self, metric):
        self.metric = metric

    def _child(self, key: tuple):
        return self.metric.labels(*key) if key else self.metric

    def set(self, key: tuple, value: float) -> None:
        self._child(key).set(value)

    def inc(self, key: tuple = (), amount: float = 1) -> None:
        self._child(key).inc(amount)

    def flush(self) -> None:
        pass
