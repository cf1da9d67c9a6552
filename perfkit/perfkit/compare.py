"""``perfkit compare A B``: what got faster or slower from results A to results B, beyond the measured spread.

A figure changed when its relative change exceeds the larger of A's spread, B's spread (max - min over
median of the repeats) and a floor of ``min_change`` (5 % by default: repeats agreeing by chance do not
make a 2 % wobble significant). Throughput: higher is better; latency: lower is better.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_CHANGE = 0.05


@dataclass
class Change:
    key: str  # scenario/workload/system/figure
    a: float
    b: float
    change: float  # (b - a) / a
    threshold: float
    verdict: str  # "faster", "slower", "same"

    def line(self) -> str:
        return (f"{self.verdict.upper():>6}  {self.key}: {self.a:,.1f} -> {self.b:,.1f} "
                f"({self.change:+.1%}, threshold {self.threshold:.1%})")


def _figures(doc: dict) -> dict:
    """{key: (stat, higher_is_better)} for every comparable figure of a results document."""
    out = {}
    for sc in doc["scenarios"]:
        for w in sc["workloads"]:
            for system, r in w["results"].items():
                base = f"{sc['name']}/{w['name']}/{system}"
                out[f"{base}/max_rps"] = (r["max_rps"], True)
                for lv in r.get("levels", []):
                    for p in ("p50", "p99"):
                        stat = lv["latency_us"].get(p)
                        if stat:
                            out[f"{base}/{lv['fraction']:.0%}/{p}"] = (stat, False)
                for p in ("p50", "p99"):
                    stat = r.get("latency_us", {}).get(p)
                    if stat:
                        out[f"{base}/{p}"] = (stat, False)
    return out


def compare(a: dict, b: dict, min_change: float = MIN_CHANGE) -> list[Change]:
    fa, fb = _figures(a), _figures(b)
    changes = []
    for key in sorted(set(fa) & set(fb)):
        (sa, higher), (sb, _) = fa[key], fb[key]
        ma, mb = sa.get("median"), sb.get("median")
        if not ma or mb is None:
            continue
        threshold = max(sa.get("spread") or 0.0, sb.get("spread") or 0.0, min_change)
        change = (mb - ma) / ma
        if abs(change) <= threshold:
            verdict = "same"
        else:
            better = change > 0 if higher else change < 0
            verdict = "faster" if better else "slower"
        changes.append(Change(key, ma, mb, change, threshold, verdict))
    return changes


def render(changes: list[Change], a_name: str, b_name: str, show_same: bool = False) -> str:
    moved = [c for c in changes if c.verdict != "same"]
    lines = [f"perfkit compare: A = {a_name}", f"                 B = {b_name}",
             f"{len(changes)} figures compared: {sum(c.verdict == 'faster' for c in changes)} faster, "
             f"{sum(c.verdict == 'slower' for c in changes)} slower, "
             f"{len(changes) - len(moved)} within the spread."]
    order = {"slower": 0, "faster": 1, "same": 2}
    for c in sorted(changes if show_same else moved, key=lambda c: (order[c.verdict], -abs(c.change))):
        lines.append(c.line())
    return "\n".join(lines) + "\n"
