"""Medians and spreads over repeats, and seeded bootstrap intervals (``paired``, ``compare``)."""

from __future__ import annotations

import random
import statistics

BOOTSTRAP_RESAMPLES = 4000


def summary(values: list[float]) -> dict:
    """{"median", "min", "max", "spread", "values"}; spread = (max - min) / median (0 when one value)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "spread": None, "values": []}
    med = statistics.median(vals)
    spread = (max(vals) - min(vals)) / med if med else 0.0
    return {"median": med, "min": min(vals), "max": max(vals), "spread": spread, "values": vals}


def median(stat: dict | None) -> float | None:
    return None if not stat else stat.get("median")


def _percentiles(est: list[float], level: float) -> tuple[float, float]:
    est.sort()
    n = len(est)
    return est[int((1 - level) / 2 * n)], est[min(n - 1, int((1 + level) / 2 * n))]


def bootstrap_interval(values: list[float], stat, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 1,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over ``values``.  Written here (a dozen lines) rather than
    pulling SciPy into the bench's environment for one function; seeded, so a report can be re-derived."""
    if len(values) < 2:
        v = stat(values) if values else float("nan")
        return v, v
    rng = random.Random(seed)
    n = len(values)
    return _percentiles([stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)], level)


def ratio_interval(a: list[float], b: list[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 1,
                   level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of median(b) ÷ median(a), each side resampled on its own (two runs are
    independent samples, not pairs). None when a side has fewer than two values or a resampled median is 0."""
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    est = []
    for _ in range(resamples):
        ma = statistics.median(rng.choices(a, k=len(a)))
        if not ma:
            return None
        est.append(statistics.median(rng.choices(b, k=len(b))) / ma)
    return _percentiles(est, level)
