"""/metrics scraping: a snapshot before and after a run, and the hot-path breakdown from the delta.

Metric names follow the monorepo's conventions: ``perfkit_hotpath_duration_seconds{hotpath=...}`` and
``http_server_request_duration_seconds``.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

HOTPATH = "perfkit_hotpath_duration_seconds"
REQUESTS = "http_server_request_duration_seconds"


def scrape(url: str, timeout: float = 2.0) -> dict | None:
    """{(sample name, hotpath label or ''): value} summed over other labels; None when unavailable."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            text = r.read().decode("utf-8", "replace")
        out: dict = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name in (HOTPATH + "_sum", HOTPATH + "_count"):
                    key = (s.name, s.labels.get("hotpath", ""))
                elif s.name == REQUESTS + "_count":
                    key = (s.name, "")
                else:
                    continue
                out[key] = out.get(key, 0.0) + float(s.value)
        return out
    except Exception:  # noqa: BLE001 - any failure just means "no metrics for this system"
        return None


def delta(before: dict | None, after: dict | None) -> dict:
    """{"requests": n, "hotpaths": {name: {"count": n, "mean_us": x}}} over a run."""
    if before is None or after is None:
        return {}
    hot: dict = {}
    for (name, label), v in after.items():
        if name == HOTPATH + "_count":
            n = v - before.get((name, label), 0.0)
            s = after.get((HOTPATH + "_sum", label), 0.0) - before.get((HOTPATH + "_sum", label), 0.0)
            if n > 0:
                hot[label] = {"count": int(n), "mean_us": s / n * 1e6}
    reqs = after.get((REQUESTS + "_count", ""), 0.0) - before.get((REQUESTS + "_count", ""), 0.0)
    return {"requests": int(reqs), "hotpaths": hot}
