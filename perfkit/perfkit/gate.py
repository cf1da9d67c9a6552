"""``perfkit gate BASELINE.toml``: a short paired check, for CI, that a service keeps its lead over a base.

Absolute req/s on a CI machine say nothing (another machine, another load); the ratio of two systems
loaded at the same time on the same CPU set does (``paired --concurrent``: the ratio of their CPU cost per
request, every fluctuation of the machine hitting both). The baseline file stores that ratio and a
tolerance; the gate passes while the bootstrap 95 % interval of the measured ratio reaches
``ratio × (1 − tolerance)``, and fails when the whole interval is below it: a noisy run (a wide interval)
passes, a clear drop fails.

The file (TOML), every key required:

    scenario = "aquilia_app"   # a server scenario of the registry
    base = "sanic"             # the system the ratio is taken against
    variant = "aquilia_app"    # the system under guard
    workload = "json"
    ratio = 1.5                # the stored variant ÷ base req/s ratio
    tolerance = 0.2            # the drop allowed before the gate fails
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass

from .paired import base_cpu_share, uneven

KEYS = ("scenario", "base", "variant", "workload", "ratio", "tolerance")


class GateError(ValueError):
    """A baseline file that is missing, not TOML or not as described above."""


@dataclass(frozen=True)
class Baseline:
    scenario: str
    base: str
    variant: str
    workload: str
    ratio: float
    tolerance: float

    @property
    def floor(self) -> float:
        return self.ratio * (1 - self.tolerance)


def parse(text: str, where: str = "baseline") -> Baseline:
    try:
        t = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GateError(f"{where}: not TOML: {e}") from None
    missing = [k for k in KEYS if k not in t]
    unknown = sorted(set(t) - set(KEYS))
    if missing or unknown:
        why = [f"missing {', '.join(missing)}"] if missing else []
        why += [f"unknown key(s) {', '.join(unknown)}"] if unknown else []
        raise GateError(f"{where}: {'; '.join(why)} (keys: {', '.join(KEYS)})")
    for k in KEYS[:4]:
        if not isinstance(t[k], str) or not t[k]:
            raise GateError(f"{where}: {k} must be a non-empty string")
    if t["base"] == t["variant"]:
        raise GateError(f"{where}: base and variant are the same system ({t['base']!r})")
    for k in ("ratio", "tolerance"):
        if not isinstance(t[k], (int, float)) or isinstance(t[k], bool) or not math.isfinite(t[k]):
            raise GateError(f"{where}: {k} must be a number")
    if t["ratio"] <= 0:
        raise GateError(f"{where}: ratio must be above 0 (variant ÷ base req/s)")
    if not 0 <= t["tolerance"] < 1:
        raise GateError(f"{where}: tolerance must be in [0, 1), e.g. 0.15 for a 15 % drop")
    return Baseline(*(t[k] for k in KEYS[:4]), float(t["ratio"]), float(t["tolerance"]))


def load(path: str) -> Baseline:
    try:
        with open(path, encoding="utf-8") as f:
            return parse(f.read(), path)
    except OSError as e:
        raise GateError(f"cannot read {path}: {e.strerror or e}") from None


def decide(baseline: Baseline, interval: list[float] | tuple[float, float]) -> str:
    """``pass`` while the interval's upper bound reaches the floor, ``fail`` when the whole interval is below."""
    return "pass" if interval[1] >= baseline.floor else "fail"


def judge(baseline: Baseline, rec: dict) -> tuple[str, list[str]]:
    """(verdict, lines saying what was measured) for a finished ``paired`` record: ``pass``, ``fail``, or
    ``error`` when there is nothing to judge (a system failed, no complete block of rounds)."""
    t = rec.get("throughput_ratio", {})
    head = f"perfkit gate: {baseline.scenario}/{baseline.variant} ÷ {baseline.base} on {baseline.workload}"
    lines = [head, f"  baseline ratio {baseline.ratio:.3f}, tolerance {baseline.tolerance:.0%}: "
                   f"the floor is {baseline.floor:.3f}"]
    if rec.get("status") != "ok" or not t.get("n"):
        lines.append(f"  nothing to judge: {rec.get('error') or 'no complete block of two rounds'}")
        return "error", lines
    lo, hi = t["median_ci95"]
    lines.append(f"  measured req/s ratio {t['median']:.3f}, 95 % interval {lo:.3f}–{hi:.3f} "
                 f"({t['n']} blocks of two rounds, both systems loaded at once)")
    c = rec.get("cpu_per_request_ratio", {})
    if c.get("n"):
        lines.append(f"  CPU time per request, base ÷ variant: {c['median']:.3f} "
                     f"({c['median_ci95'][0]:.3f}–{c['median_ci95'][1]:.3f})")
    share = base_cpu_share(rec["rounds"])
    if uneven(share):
        lines.append(f"  uneven CPU split (base got {share:.0%}): one system was not saturated, so the req/s ratio "
                     "is not the ratio of CPU cost per request")
    verdict = decide(baseline, (lo, hi))
    failed = sum(r["variant"]["errors"] + r["variant"]["failed_answers"] for r in rec["rounds"])
    if failed:  # a variant that fails fast can look fast
        lines.append(f"  {baseline.variant} failed {failed} requests")
        verdict = "fail"
    lines.append(f"  {verdict.upper()}" + ("" if verdict == "pass" or failed else
                                          f": the whole interval is below {baseline.floor:.3f}"))
    return verdict, lines
