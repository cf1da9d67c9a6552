"""Medians and spreads over repeats."""

from __future__ import annotations

import statistics


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
