"""Paired A/B: is a variant within a given cost of its base?  (``perfkit paired``)

The bench's probes answer "how fast is each system", a few seconds apiece; on a shared VM their spread
(±10-50 % here) hides a difference of a few percent.  A claim such as "instrumentation costs <= 5 %"
needs a design aimed at the difference itself:

1. both systems run side by side for the whole measurement, pinned to the same CPU set (only the one
   under load uses it), so neither pays start-up or a different placement in memory per round;
2. many short rounds; each round measures both back to back (closed loop, ``perfkit-load --max``), every
   other round in the reverse order (``runner.round_order``), so a drift of the machine lands on both
   and neither is always second;
3. the figure is the ratio variant ÷ base; its unit is a *block* of two rounds (one in each order),
   whose ratio is the geometric mean of its two rounds' ratios: whatever favours the first (or the
   second) system of a round cancels within the block (on a 2-core VM such effects reached ±10 % per round,
   in either direction from one run to the next).  The blocks' ratios give a median with a bootstrap 95 % interval and a
   geometric mean with its own; the position effect itself is reported (first ÷ second of a round);
4. the CPU time each system spent per request in its window (from /proc) is reported beside it: on a
   saturated pinned CPU the throughput is its inverse, and it does not count time stolen by the host.

``--concurrent`` loads both systems at the same time instead of one after the other.  They share their
CPU set, and the kernel gives each an equal share of CPU time (the record shows what each got), so the
ratio of their req/s is the inverse ratio of their CPU time per request - and every fluctuation of the
machine hits both at once.  On a 2-core VM it cut the standard deviation of a block's ratio from 6-15 % to 0.9 %.  What it
measures is the cost per request of a saturated server, not the req/s of either running alone (the
default mode measures that); an A/A run (one system against a copy of itself) checks the fairness.

With ``--max-cost C`` the verdict is ``within`` when the whole interval of the median ratio is at or above
1 - C, ``over`` when the whole interval is below it, else ``undecided`` (more rounds, or a quieter
machine).  The number of rounds is fixed up front: stopping when the interval first looks good would bias it.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from statistics import geometric_mean

from . import loadgen
from .runner import Settings, Started, cacert_of, round_order, start_system, workload_url
from .scenarios import Scenario, Workload
from .stats import BOOTSTRAP_RESAMPLES, bootstrap_interval

# --concurrent: the base's share of the CPU time outside this range means the two were not both saturated
UNEVEN_SHARE = (0.45, 0.55)


@dataclass
class PairedSettings:
    rounds: int = 40
    round_s: float = 2.0  # each system's measured window per round
    warmup_s: float = 2.0  # once per system before the first round
    round_warmup_s: float = 0.25  # per window, not measured (connections opened, caches warm)
    max_cost: float | None = None
    seed: int = 1
    concurrent: bool = False  # both systems loaded at the same time, sharing their CPU set


def summarise(ratios: list[float], *, seed: int = 1) -> dict:
    """Median and geometric mean of ratios, each with a bootstrap 95 % interval."""
    if not ratios:
        return {"n": 0}
    return {
        "n": len(ratios),
        "median": statistics.median(ratios),
        "median_ci95": list(bootstrap_interval(ratios, statistics.median, seed=seed)),
        "geomean": geometric_mean(ratios),
        "geomean_ci95": list(bootstrap_interval(ratios, geometric_mean, seed=seed)),
        "above_1": sum(1 for r in ratios if r > 1.0),
    }


def block_ratios(rounds: list[dict], key: str) -> list[float]:
    """One ratio per block of two consecutive rounds (opposite orders): the geometric mean of the two."""
    out = []
    for i in range(0, len(rounds) - 1, 2):
        r1, r2 = rounds[i][key], rounds[i + 1][key]
        if r1 and r2:
            out.append(math.sqrt(r1 * r2))
    return out


def position_ratios(rounds: list[dict]) -> list[float]:
    """Per round: req/s of the system measured first ÷ of the one measured second."""
    out = []
    for r in rounds:
        first, second = (r["base"], r["variant"]) if r["order"][0] == "base" else (r["variant"], r["base"])
        if first["rps"] and second["rps"]:
            out.append(first["rps"] / second["rps"])
    return out


def base_cpu_share(rounds: list[dict]) -> float | None:
    """Median over rounds of the base's share of the two systems' CPU time (--concurrent: 0.5 when fair)."""
    shares = [r["base"]["cpu_s"] / (r["base"]["cpu_s"] + r["variant"]["cpu_s"])
              for r in rounds if r["base"]["cpu_s"] + r["variant"]["cpu_s"] > 0]
    return statistics.median(shares) if shares else None


def uneven(cpu_share: float | None) -> bool:
    """--concurrent: a split of the CPU time outside UNEVEN_SHARE (one system was not saturated)."""
    return cpu_share is not None and not UNEVEN_SHARE[0] <= cpu_share <= UNEVEN_SHARE[1]


def verdict(summary: dict, max_cost: float | None, cpu_share: float | None = None) -> str | None:
    """``within`` / ``over`` / ``undecided`` for a throughput ratio (variant ÷ base) against a max cost.
    ``cpu_share`` (--concurrent): an uneven split means the ratio is not the CPU-cost ratio: undecided."""
    if max_cost is None or not summary.get("n"):
        return None
    if uneven(cpu_share):
        return "undecided"
    floor = 1.0 - max_cost
    lo, hi = summary["median_ci95"]
    if lo >= floor:
        return "within"
    if hi < floor:
        return "over"
    return "undecided"


class PairedRun:
    """Base and variant of one scenario on one workload; ``record`` fills in as rounds complete."""

    def __init__(self, scenario: Scenario, base: str, variant: str, workload: Workload, settings: Settings,
                 paired: PairedSettings, progress):
        by_name = {s.name: s for s in scenario.systems}
        self.sc = scenario
        self.w = workload
        self.settings = settings
        self.paired = paired
        self.progress = progress
        self.base = Started(by_name[base])
        self.variant = Started(by_name[variant])
        self.record: dict = {
            "scenario": scenario.name, "base": base, "variant": variant, "status": "ok",
            "workload": {"name": workload.name, "mode": workload.mode, "method": workload.method, "path": workload.path,
                         "connections": workload.connections},
            "settings": {"rounds": paired.rounds, "round_s": paired.round_s, "warmup_s": paired.warmup_s,
                         "round_warmup_s": paired.round_warmup_s, "max_cost": paired.max_cost,
                         "concurrent": paired.concurrent,
                         "seed": paired.seed, "resamples": BOOTSTRAP_RESAMPLES},
            "rounds": [], "throughput_ratio": {"n": 0}, "cpu_per_request_ratio": {"n": 0},
            "first_over_second": {"n": 0}, "verdict": None,
        }

    def steps(self) -> int:
        return 2 + 2 + (1 if self.paired.concurrent else 2) * self.paired.rounds

    def _window(self, st: Started, duration: float, warmup: float) -> dict:
        """One closed-loop window on ``st``: req/s and CPU µs per request of its process tree."""
        s = self.settings
        w = self.w
        st.proc.sample()
        cpu0 = st.proc.cpu_seconds
        res = loadgen.run(s.load_bin, workload_url(st, w), mode=w.mode, method=w.method, body=w.body,
                          headers=w.headers, connections=w.connections, duration=duration, warmup=warmup,
                          rate=None, cpus=s.load_cpus, scenario=f"{self.sc.name}/{w.name}/{st.system.name}",
                          cacert=cacert_of(st))
        st.proc.sample()
        if not st.proc.alive():
            raise loadgen.LoadError(f"{st.system.name} exited with status {st.proc.popen.returncode}")
        cpu = st.proc.cpu_seconds - cpu0
        # the CPU delta spans the warm-up too; the engine's requests cover only the measured window
        served = res["requests"] * (duration + warmup) / duration if duration else 0
        out = res.get("outcomes", {})
        return {"rps": res["achieved_rate"], "errors": res["errors"],
                "failed_answers": sum(out.get(k, 0) for k in ("3xx", "4xx", "5xx", "other_status", "rpc_error")),
                "cpu_s": round(cpu, 3),
                "cpu_us_per_request": 1e6 * cpu / served if served else None}

    def _together(self, order: list[Started]) -> dict:
        """Both windows at the same time (``concurrent``), started in ``order``."""
        with ThreadPoolExecutor(2) as pool:
            futures = {st: pool.submit(self._window, st, self.paired.round_s, self.paired.round_warmup_s)
                       for st in order}
            return {st: f.result() for st, f in futures.items()}

    def run(self) -> dict:
        pair = [self.base, self.variant]
        try:
            for st in pair:
                self.progress.step(f"start {st.system.name}")
                start_system(st, self.settings, self.settings.sut_cpus)
                if not st.ok:
                    self.record["status"] = "failed"
                    self.record["error"] = f"{st.system.name}: {st.error}\n{st.log_tail}".strip()
                    return self.record
            for st in pair:
                self.progress.step(f"warm up {st.system.name} ({self.paired.warmup_s:g} s)")
                self._window(st, self.paired.warmup_s, 0.0)
            for r in range(self.paired.rounds):
                order = round_order(pair, r)
                if self.paired.concurrent:
                    self.progress.step(f"round {r + 1}/{self.paired.rounds}: both at once")
                    got = self._together(order)
                else:
                    got = {}
                    for st in order:
                        self.progress.step(f"round {r + 1}/{self.paired.rounds}: {st.system.name}")
                        got[st] = self._window(st, self.paired.round_s, self.paired.round_warmup_s)
                b, v = got[self.base], got[self.variant]
                rounds = self.record["rounds"]
                rounds.append({
                    "order": ["base" if st is self.base else "variant" for st in order], "base": b, "variant": v,
                    "throughput_ratio": v["rps"] / b["rps"] if b["rps"] else None,
                    # base CPU ÷ variant CPU: above 1 when the variant needs less, like the throughput ratio
                    "cpu_ratio": (b["cpu_us_per_request"] / v["cpu_us_per_request"]
                                  if b["cpu_us_per_request"] and v["cpu_us_per_request"] else None)})
                note = f"variant {v['rps']:,.0f}, base {b['rps']:,.0f} req/s"
                blocks = block_ratios(rounds, "throughput_ratio")
                if r % 2 and blocks:  # cheap running figure; the intervals are computed once, at the end
                    note += f"; block {len(blocks)}: {blocks[-1]:.3f}, median so far {statistics.median(blocks):.3f}"
                self.progress.note(note)
        except loadgen.LoadError as e:
            self.record["status"] = "failed"
            self.record["error"] = str(e)
        finally:
            for st in pair:
                if st.proc:
                    st.proc.stop()
            self._publish()
            self.record["systems"] = [st.record() for st in pair]
        return self.record

    def _publish(self) -> None:
        rounds = self.record["rounds"]
        seed = self.paired.seed
        self.record["throughput_ratio"] = summarise(block_ratios(rounds, "throughput_ratio"), seed=seed)
        self.record["cpu_per_request_ratio"] = summarise(block_ratios(rounds, "cpu_ratio"), seed=seed)
        self.record["first_over_second"] = summarise(position_ratios(rounds), seed=seed)
        share = base_cpu_share(rounds) if self.paired.concurrent else None
        self.record["verdict"] = verdict(self.record["throughput_ratio"], self.paired.max_cost, share)


def render(rec: dict) -> str:
    """A short Markdown account of a paired run."""
    w = rec["workload"]
    s = rec["settings"]
    what = f"WebSocket {w['path']}" if w.get("mode") == "ws" else f"{w['method']} {w['path']}"
    lines = [f"# perfkit paired: {rec['scenario']}/{rec['variant']} ÷ {rec['base']}", "",
             f"{what}, {w['connections']} connections per system, closed loop; "
             f"{len(rec['rounds'])} of {s['rounds']} rounds of {s['round_s']:g} s per system, "
             + ("both systems loaded at the same time, sharing their CPU set (started in alternating order)"
                if s.get("concurrent") else "one system after the other, in alternating order")
             + "; both systems running throughout; one ratio per block of two rounds (one in each order).", ""]
    if rec["status"] != "ok":
        lines += [f"**{rec['status']}**: {rec.get('error', '')}", ""]
    lines += ["| variant ÷ base | median | 95 % interval | geometric mean | 95 % interval | blocks | above 1 |",
              "|---|---|---|---|---|---|---|"]
    for key, label in (("throughput_ratio", "req/s"), ("cpu_per_request_ratio", "CPU time per request, inverted")):
        t = rec[key]
        if not t.get("n"):
            lines.append(f"| {label} | – | – | – | – | 0 | – |")
            continue
        lines.append(f"| {label} | {t['median']:.3f} | {t['median_ci95'][0]:.3f}–{t['median_ci95'][1]:.3f} | "
                     f"{t['geomean']:.3f} | {t['geomean_ci95'][0]:.3f}–{t['geomean_ci95'][1]:.3f} | {t['n']} | "
                     f"{t['above_1']} |")
    if rec["rounds"]:
        rps_b = statistics.median(r["base"]["rps"] for r in rec["rounds"])
        rps_v = statistics.median(r["variant"]["rps"] for r in rec["rounds"])
        lines += ["", f"Median req/s over the rounds: base {rps_b:,.0f}, variant {rps_v:,.0f}."]
        bad = {side: sum(r[side]["errors"] + r[side]["failed_answers"] for r in rec["rounds"])
               for side in ("base", "variant")}
        if any(bad.values()):  # a system that fails fast can look fast: say so next to the figures
            lines.append("**Failed requests** (errors, timeouts, non-2xx or JSON-RPC error answers): "
                         f"base {bad['base']}, variant {bad['variant']}.")
    pos = rec["first_over_second"]
    share = base_cpu_share(rec["rounds"])
    if s.get("concurrent") and share is not None:
        lines.append(f"Share of the CPU time the base got in a round: median {share:.3f}.")
        if uneven(share):
            lines.append("**Uneven CPU split**: at least one system was not saturated (its load, not the CPU, set its "
                         "pace), so the req/s ratio is not the ratio of CPU cost per request; read the CPU row, or "
                         "measure one after the other (without --concurrent). No verdict on this run.")
    elif pos.get("n"):
        lines.append(f"Position effect (req/s of a round's first system ÷ its second): median {pos['median']:.3f} "
                     f"({pos['median_ci95'][0]:.3f}–{pos['median_ci95'][1]:.3f}); the blocks cancel it.")
    if rec["verdict"]:
        lines += ["", f"**Verdict: {rec['verdict']}** — max cost {s['max_cost']:.1%}: the interval of the median "
                      f"req/s ratio against {1 - s['max_cost']:.3f}."]
    return "\n".join(lines) + "\n"


def write(rec: dict, out: str) -> list[str]:
    os.makedirs(out, exist_ok=True)
    paths = [os.path.join(out, "paired.json"), os.path.join(out, "paired.md")]
    with open(paths[0], "w") as f:
        json.dump(rec, f, indent=1)
    with open(paths[1], "w") as f:
        f.write(render(rec))
    return paths
