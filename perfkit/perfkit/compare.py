"""``perfkit compare A B``: what got worse or better from results A to results B.

1. The two runs must have been measured the same way: suite, load engine version, machine (CPU model and
   count), settings (durations, repeats, levels, search steps) and each shared workload's connections and
   SLO. Otherwise the comparison is refused, listing every mismatch (``force`` goes on with a warning).
2. Figures are keyed by absolute quantities, per scenario/workload/system: the sustainable rate, CPU time per
   request, the closed-loop max, failed answers, and p50/p99 at a constant rate. A level's latency (and the
   CPU per request) depends on the offered rate, so it is compared only when A and B offered the same
   absolute rate (within 1 %); the levels are fractions of a reference system's max, which moves between
   runs, so this is not a given.
3. A figure is worse (or better) when the whole bootstrap 95 % interval of the ratio B ÷ A of the medians
   over the repeats lies beyond 1 ∓ ``min_change`` in that direction; ``unclear`` when the ratio itself lies
   beyond but the interval does not; else ``same``. With one value per side there is no interval: the
   ratio alone is judged against ``min_change``. Failed answers: any from none, or more by over
   ``min_change``, is worse.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from . import stats

MIN_CHANGE = 0.05
RATE_MATCH = 0.01  # two offered rates within 1 % are the same rate
VERDICTS = ("worse", "better", "unclear", "not comparable", "same")
NO_INTERVAL = "one repeat: no interval"
TWO_REPEATS = "two repeats: the interval is their range"


@dataclass
class Change:
    key: str  # scenario/workload/system/figure
    unit: str
    a: float | None
    b: float | None
    verdict: str  # one of VERDICTS
    ratio: float | None = None  # B ÷ A of the medians
    interval: list[float] | None = None  # its bootstrap 95 % interval
    note: str = ""

    def line(self) -> str:
        label = {"not comparable": "N/C"}.get(self.verdict, self.verdict).upper()
        if self.a is None and self.b is None:
            return f"{label:<8}{self.key}: {self.note}"
        text = f"{label:<8}{self.key}: {_num(self.a)} → {_num(self.b)} {self.unit}"
        if self.ratio is not None:
            text += f", B/A {self.ratio:.3f}"
            if self.interval:
                text += f" [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"
        return text + (f" ({self.note})" if self.note else "")


def _num(v) -> str:
    if v is None:
        return "none"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}"


# -- 1. were A and B measured the same way? -------------------------------------------------------------

def _workloads(doc: dict) -> dict:
    return {(sc["name"], w["name"]): w for sc in doc["scenarios"] for w in sc["workloads"]}


def mismatches(a: dict, b: dict) -> list[str]:
    """Every setting that differs between A and B, as 'what: A vs B'."""
    out = []

    def check(what, va, vb):
        if va != vb:
            out.append(f"{what}: {va!r} vs {vb!r}")

    check("suite", a.get("suite"), b.get("suite"))
    check("load engine version", a["load_engine"].get("version"), b["load_engine"].get("version"))
    for k in ("cpu_model", "cpus"):
        check(f"machine {k}", a["machine"].get(k), b["machine"].get(k))
    for k in ("duration_s", "probe_s", "repeat", "levels", "search_steps"):
        check(f"settings {k}", a["settings"].get(k), b["settings"].get(k))
    wa, wb = _workloads(a), _workloads(b)
    for key in wa:
        if key in wb:
            for k in ("connections", "slo_p99_us"):
                check(f"{'/'.join(key)} {k}", wa[key].get(k), wb[key].get(k))
    return out


# -- 2. and 3. the figures and their verdicts --------------------------------------------------------------

def judge(a: list[float], b: list[float], higher_is_better: bool, min_change: float = MIN_CHANGE, *,
          seed: int = 1, resamples: int = stats.BOOTSTRAP_RESAMPLES) -> tuple[float, list[float] | None, str]:
    """(ratio of medians B ÷ A, its interval or None, verdict) for two sets of repeat values."""
    ratio = statistics.median(b) / statistics.median(a)

    def bad(r):
        return r < 1 - min_change if higher_is_better else r > 1 + min_change

    def good(r):
        return r > 1 + min_change if higher_is_better else r < 1 - min_change

    ci = stats.ratio_interval(a, b, seed=seed, resamples=resamples)
    if ci is None:
        return ratio, None, "worse" if bad(ratio) else "better" if good(ratio) else "same"
    lo, hi = ci
    if bad(lo) and bad(hi):
        verdict = "worse"
    elif good(lo) and good(hi):
        verdict = "better"
    else:
        verdict = "unclear" if bad(ratio) or good(ratio) else "same"
    return ratio, [lo, hi], verdict


def _rate_match(ra: float | None, rb: float | None) -> bool:
    return ra is not None and rb is not None and abs(rb - ra) <= RATE_MATCH * max(ra, rb)


class _Comparer:
    def __init__(self, min_change: float, seed: int, resamples: int):
        self.min_change = min_change
        self.seed = seed
        self.resamples = resamples
        self.changes: list[Change] = []

    def stat(self, key: str, unit: str, sa: dict | None, sb: dict | None, higher: bool, note: str = "") -> None:
        va = [v for v in (sa or {}).get("values", []) if v is not None]
        vb = [v for v in (sb or {}).get("values", []) if v is not None]
        if not va or not vb or not statistics.median(va):
            return
        ratio, ci, verdict = judge(va, vb, higher, self.min_change, seed=self.seed, resamples=self.resamples)
        if ci is None:
            note = ", ".join(x for x in (note, NO_INTERVAL) if x)
        elif min(len(va), len(vb)) == 2:  # the resampled medians span the values' range, nothing more
            note = ", ".join(x for x in (note, TWO_REPEATS) if x)
        self.changes.append(Change(key, unit, statistics.median(va), statistics.median(vb), verdict, ratio, ci, note))

    def sustainable(self, key: str, a: float | None, b: float | None) -> None:
        """One value per run (a search, not repeats): the ratio alone against the minimum change."""
        if a is None and b is None:
            self.changes.append(Change(key, "req/s", a, b, "same", note="no rate sustained in A nor in B"))
        elif a is None or b is None:
            side = "B" if b is None else "A"
            self.changes.append(Change(key, "req/s", a, b, "worse" if side == "B" else "better",
                                       note=f"no rate sustained in {side}"))
        elif a > 0:
            ratio, _, verdict = judge([a], [b], True, self.min_change)
            self.changes.append(Change(key, "req/s", a, b, verdict, ratio, None, "one search per run: no interval"))

    def errors(self, key: str, a: int, b: int) -> None:
        if b > a and (a == 0 or b > a * (1 + self.min_change)):
            verdict = "worse"
        elif a > 0 and b < a * (1 - self.min_change):
            verdict = "better"
        else:
            verdict = "same"
        self.changes.append(Change(key, "failed answers", a, b, verdict, b / a if a else None))

    def not_comparable(self, key: str, why: str) -> None:
        self.changes.append(Change(key, "", None, None, "not comparable", note=f"not comparable: {why}"))

    def result(self, base: str, wa: dict, wb: dict, ra: dict, rb: dict) -> None:
        if "sustainable" in ra and "sustainable" in rb:
            self.sustainable(f"{base}/sustainable_rate", ra["sustainable"].get("rate"), rb["sustainable"].get("rate"))
        ca, cb = ra.get("cpu_per_request_us"), rb.get("cpu_per_request_us")
        if ca and cb:
            if _rate_match(wa.get("cpu_rate"), wb.get("cpu_rate")):
                self.stat(f"{base}/cpu_per_request_us", "µs/request", ca, cb, False)
            else:
                self.not_comparable(f"{base}/cpu_per_request_us", f"measured at {_num(wa.get('cpu_rate'))} vs "
                                                                  f"{_num(wb.get('cpu_rate'))} req/s")
        bound = [side for side, r in (("A", ra), ("B", rb)) if r.get("load_generator_bound")]
        if bound:  # the engine's limit, not the system's
            self.not_comparable(f"{base}/max_rps", f"load-generator bound in {' and '.join(bound)}")
        else:
            self.stat(f"{base}/max_rps", "req/s", ra["max_rps"], rb["max_rps"], True)
        self.errors(f"{base}/errors", ra.get("errors", 0), rb.get("errors", 0))
        for p in ("p50", "p99"):  # client scenarios: latency of back-to-back requests
            self.stat(f"{base}/{p}", "µs", ra.get("latency_us", {}).get(p), rb.get("latency_us", {}).get(p), False)
        self.levels(base, ra.get("levels", []), rb.get("levels", []))

    def levels(self, base: str, la: list[dict], lb: list[dict]) -> None:
        for x in la:
            rate = x["target_rate"]
            y = next((y for y in lb if _rate_match(rate, y["target_rate"])), None)
            if y is None:
                other = next((y for y in lb if y["fraction"] == x["fraction"]), None)
                if other is not None:
                    self.not_comparable(f"{base}/level {x['fraction']:.0%}",
                                        f"measured at {_num(rate)} vs {_num(other['target_rate'])} req/s")
                continue
            at = f"@{rate:.0f}"
            held = (x.get("held", True), y.get("held", True))
            if held == (False, False):
                self.not_comparable(f"{base}/held{at}", "neither A nor B held the rate")
            elif held != (True, True):
                side, lv = ("B", y) if held[0] else ("A", x)
                achieved = stats.median(lv.get("achieved_rate")) or 0.0
                self.changes.append(Change(f"{base}/held{at}", "req/s achieved", stats.median(x.get("achieved_rate")),
                                           stats.median(y.get("achieved_rate")), "worse" if held[0] else "better",
                                           note=f"{side} did not hold {_num(rate)} req/s (achieved {_num(achieved)})"))
            else:
                for p in ("p50", "p99"):
                    self.stat(f"{base}/{p}{at}", "µs", x["latency_us"].get(p), y["latency_us"].get(p), False)


def _systems(doc: dict) -> dict:
    return {(sc["name"], s["name"]): s for sc in doc["scenarios"] for s in sc["systems"]}


def compare(a: dict, b: dict, min_change: float = MIN_CHANGE, *, seed: int = 1,
            resamples: int = stats.BOOTSTRAP_RESAMPLES) -> list[Change]:
    """Every figure A and B share, with its verdict, in A's order."""
    c = _Comparer(min_change, seed, resamples)
    sys_b = _systems(b)
    for key, s in _systems(a).items():
        t = sys_b.get(key)
        if t is not None and (s["status"] == "failed") != (t["status"] == "failed"):
            side, err = ("B", t.get("error")) if t["status"] == "failed" else ("A", s.get("error"))
            why = (err or "").strip().splitlines()[:1]
            c.changes.append(Change(f"{'/'.join(key)}/status", "", None, None, "worse" if side == "B" else "better",
                                    note=": ".join([f"failed in {side}"] + why)))
    wb = _workloads(b)
    for key, wa in _workloads(a).items():
        if key not in wb:
            continue
        for system, ra in wa["results"].items():
            rb = wb[key]["results"].get(system)
            if rb is not None:
                c.result(f"{key[0]}/{key[1]}/{system}", wa, wb[key], ra, rb)
    return c.changes


def only_in(a: dict, b: dict) -> list[str]:
    """scenario/workload/system results present in ``a`` and missing from ``b``."""
    have = {(k, s) for k, w in _workloads(b).items() for s in w["results"]}
    return [f"{k[0]}/{k[1]}/{s}" for k, w in _workloads(a).items() for s in w["results"] if (k, s) not in have]


def counts(changes: list[Change]) -> dict:
    return {v: sum(c.verdict == v for c in changes) for v in VERDICTS}


def render(changes: list[Change], a_name: str, b_name: str, *, show_same: bool = False,
           mismatched: list[str] = (), missing: tuple[list[str], list[str]] = ([], []),
           min_change: float = MIN_CHANGE) -> str:
    n = counts(changes)
    lines = [f"perfkit compare: A = {a_name}", f"                 B = {b_name}"]
    if mismatched:
        lines.append("WARNING: A and B were not measured the same way (--force):")
        lines += [f"  {m}" for m in mismatched]
    lines.append(f"verdicts: the 95 % bootstrap interval of B/A of the medians against 1 ± {min_change:.0%}")
    lines.append(f"{len(changes)} figures: " + ", ".join(f"{n[v]} {v}" for v in VERDICTS) + ".")
    for side, names in zip("AB", missing):
        if names:
            lines.append(f"only in {side}: {', '.join(names)}")
    order = {v: i for i, v in enumerate(VERDICTS)}
    shown = [c for c in changes if show_same or c.verdict != "same"]
    lines += [c.line() for c in sorted(shown, key=lambda c: order[c.verdict])]
    return "\n".join(lines) + "\n"


def to_json(changes: list[Change], a_name: str, b_name: str, *, mismatched: list[str], forced: bool,
            min_change: float, seed: int, resamples: int = stats.BOOTSTRAP_RESAMPLES) -> dict:
    return {"a": a_name, "b": b_name, "min_change": min_change, "interval_level": 0.95, "resamples": resamples,
            "seed": seed, "rate_match": RATE_MATCH, "mismatches": list(mismatched), "forced": forced,
            "counts": counts(changes), "changes": [asdict(c) for c in changes]}
