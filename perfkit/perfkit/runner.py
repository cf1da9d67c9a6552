"""The method, per server scenario and workload:

1. start every system of the scenario pinned to the systems' CPU set, wait until each is ready;
2. warm-up, then a closed-loop saturation probe (``perfkit-load --max``) per system, N repeats → max req/s;
   the repeats are rounds over every system, every other round in reverse order (``round_order``), so no
   system is always measured right after the same neighbour or always first;
3. constant-rate runs at 50/75/90 % of the *slowest* system's median max (or of the scenario's
   ``rate_reference`` system's) — the same absolute rates for every system, so their corrected latencies
   compare — N repeats each;
4. /metrics scraped before and after each system's share of the workload (hot-path breakdown);
5. peak RSS and CPU time sampled from /proc; everything stopped cleanly.

A system that fails to start or dies is reported failed with its log tail and the rest goes on.
Client scenarios are in ``clients``.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from . import loadgen, promtext, stats
from .procs import Proc, StartError, free_port
from .scenarios import Scenario, System, Version, Workload, substitute

PERCENTILES = ("p50", "p75", "p90", "p99", "p99_9", "p99_99", "max")
SPECTRUM_POINTS = (0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999)


@dataclass
class Settings:
    suite: str = "quick"
    duration: float = 2.0  # each constant-rate run
    probe: float = 2.0  # each closed-loop probe
    warmup: float = 1.0
    repeat: int = 3
    levels: tuple[float, ...] = (0.5, 0.75, 0.9)
    load_bin: str = "perfkit-load"
    bins: dict = field(default_factory=dict)
    peers_dir: str = ""
    sut_cpus: str | None = None
    load_cpus: str | None = None
    metrics_addr: str | None = None
    work_dir: str = ""


def round_order(items: list, r: int) -> list:
    """The order of round ``r`` (0-based): as listed, then reversed, alternately (an ABBA design: with an
    even number of repeats every pair of systems is measured as often in one order as in the other, so a
    drift or a neighbour's after-effect lands on both alike instead of on whoever comes second)."""
    return items if r % 2 == 0 else items[::-1]


def version_of(v: Version, bins: dict, values: dict) -> str:
    try:
        if v.text:
            return v.text
        if v.dist:
            return importlib.metadata.version(v.dist)
        if v.command:
            cmd = [substitute(c, values, bins) for c in v.command]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            lines = (out.stdout + out.stderr).strip().splitlines()
            first = lines[0].strip() if lines else "unknown"
            return first.split("version:", 1)[1].strip() if "version:" in first else first
    except KeyError as e:
        return f"unknown (binary {e.args[0]} not found)"
    except (importlib.metadata.PackageNotFoundError, OSError, subprocess.SubprocessError):
        return "not installed"
    return "unknown"


class Started:
    """A system of a scenario, with its process and what was recorded about it."""

    def __init__(self, system: System):
        self.system = system
        self.proc: Proc | None = None
        self.port = 0
        self.values: dict = {}
        self.status = "ok"
        self.error = ""
        self.log_tail = ""
        self.version = ""
        self.command: list[str] = []

    def fail(self, msg: str, tail: str = "") -> None:
        self.status, self.error = "failed", msg
        self.log_tail = tail or (self.proc.log_tail() if self.proc else "")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def record(self) -> dict:
        p = self.proc
        return {
            "name": self.system.name, "role": self.system.role, "description": self.system.description,
            "version": self.version, "status": self.status, "error": self.error, "log_tail": self.log_tail,
            "command": self.command, "port": self.port,
            "peak_rss_bytes": p.peak_rss if p else 0, "cpu_seconds": round(p.cpu_seconds, 3) if p else 0.0,
        }


def start_system(st: Started, settings: Settings, cpus: str | None) -> None:
    """Start ``st`` (files written, placeholders filled) and wait until ready; failures recorded on ``st``."""
    s = st.system
    tmp = tempfile.mkdtemp(prefix=f"{s.name}-", dir=settings.work_dir or None)
    st.port = free_port()
    st.values = {"port": st.port, "host": "127.0.0.1", "tmp": tmp, "python": sys.executable,
                 "peers": settings.peers_dir}
    st.version = version_of(s.version, settings.bins, st.values)
    try:
        cmd = [substitute(c, st.values, settings.bins) for c in s.command]
        env = dict(os.environ)
        env.update({k: substitute(v, st.values, settings.bins) for k, v in s.env.items()})
        for fname, text in s.files.items():
            with open(os.path.join(tmp, fname), "w") as f:
                f.write(substitute(text, st.values, settings.bins))
        cwd = substitute(s.cwd, st.values, settings.bins) if s.cwd else None
        ready = substitute(s.ready, st.values, settings.bins)
    except KeyError as e:
        name = e.args[0]
        st.fail(f"missing binary {name!r}: pass --bin {name}=PATH or set "
                f"PERFKIT_BIN_{name.upper().replace('-', '_').replace('.', '_')}")
        return
    st.command = cmd
    try:
        st.proc = Proc(s.name, cmd, env=env, cwd=cwd, cpus=cpus,
                       log_path=os.path.join(tmp, "output.log"))
        st.proc.wait_ready(ready, s.ready_timeout_s)
        st.proc.sample()
    except StartError as e:
        st.fail(str(e), e.log_tail)


def workload_url(st: Started, w: Workload) -> str:
    scheme = "ws" if w.mode == "ws" else "http"
    return f"{scheme}://127.0.0.1:{st.port}{w.path}"


def _merge_spectrum(hdrs: list[str]) -> list[list[float]]:
    """Merge base64 HdrHistograms (losslessly) and read the percentile spectrum [[p, us], ...]."""
    from hdrh.histogram import HdrHistogram

    merged = None
    for h in hdrs:
        if not h:
            continue
        try:
            one = HdrHistogram.decode(h)
        except Exception:  # noqa: BLE001 - an unreadable histogram only loses the plot
            continue
        if merged is None:
            merged = one
        else:
            merged.add(one)
    if merged is None or merged.get_total_count() == 0:
        return []
    return [[p, float(merged.get_value_at_percentile(p * 100.0))] for p in SPECTRUM_POINTS]


class ServerRun:
    """One server scenario end to end; ``record`` is filled as figures arrive (Ctrl-C keeps them)."""

    def __init__(self, scenario: Scenario, members: list[str] | None, settings: Settings, progress):
        self.sc = scenario
        self.settings = settings
        self.progress = progress
        # named with --only: always run; otherwise only the systems of this suite
        systems = [s for s in scenario.systems
                   if (s.name in members if members is not None else settings.suite in s.suites)]
        self.started = [Started(s) for s in systems]
        self.record: dict = {"name": scenario.name, "kind": "server", "description": scenario.description,
                             "status": "ok", "systems": [], "workloads": []}

    def steps(self) -> int:
        wl = len(self.sc.workloads_for(self.settings.suite))
        return len(self.started) * (1 + wl * self.settings.repeat * (1 + len(self.settings.levels)))

    def _check_alive(self, st: Started) -> bool:
        if st.ok and st.proc and not st.proc.alive():
            st.fail(f"{st.system.name} exited with status {st.proc.popen.returncode} during the run")
        return st.ok

    def run(self) -> dict:
        try:
            for st in self.started:
                self.progress.step(f"{self.sc.name}: start {st.system.name}")
                start_system(st, self.settings, self.settings.sut_cpus)
                self.progress.note(f"{st.system.name}: " + ("ready" if st.ok else f"FAILED: {st.error}"))
            for w in self.sc.workloads_for(self.settings.suite):
                self._workload(w)
        finally:
            for st in self.started:
                if st.proc:
                    st.proc.stop()
            self.record["systems"] = [st.record() for st in self.started]
            if any(not st.ok for st in self.started):
                self.record["status"] = "partial" if any(st.ok for st in self.started) else "failed"
        return self.record

    def _load(self, st: Started, w: Workload, rate: float | None, duration: float, warmup: float) -> dict | None:
        s = self.settings
        try:
            res = loadgen.run(s.load_bin, workload_url(st, w), mode=w.mode, method=w.method, body=w.body,
                              headers=w.headers, connections=w.connections, duration=duration, warmup=warmup,
                              rate=rate, cpus=s.load_cpus, scenario=f"{self.sc.name}/{w.name}/{st.system.name}",
                              metrics_addr=s.metrics_addr)
        except loadgen.LoadError as e:
            if self._check_alive(st):
                st.fail(f"load run failed: {e}")
            return None
        if st.proc:
            st.proc.sample()
        if not self._check_alive(st):
            return None
        return res

    def _workload(self, w: Workload) -> None:
        s = self.settings
        wrec = {"name": w.name, "mode": w.mode, "method": w.method, "path": w.path,
                "connections": w.connections, "rates": [], "results": {}}
        self.record["workloads"].append(wrec)
        live = [st for st in self.started if st.ok]
        per: dict = {st.system.name: {"max_rps": [], "errors": 0, "requests": 0, "levels": {},
                                      "probe_latency": [], "metrics": {}} for st in live}
        before = {st.system.name: promtext.scrape(substitute(st.system.metrics, st.values, s.bins))
                  for st in live if st.system.metrics}

        def publish():
            wrec["results"] = {name: self._summarise(d, wrec["rates"]) for name, d in per.items()}

        # 1) warm-up + closed-loop saturation probe, N repeats
        wrec["order"] = [[st.system.name for st in round_order(live, r)] for r in range(s.repeat)]
        for r in range(s.repeat):
            for st in round_order(live, r):
                if not st.ok:
                    continue
                self.progress.step(f"{self.sc.name}/{w.name}: probe {st.system.name} (repeat {r + 1}/{s.repeat})")
                res = self._load(st, w, None, s.probe, s.warmup if r == 0 else min(s.warmup, 0.5))
                if res is None:
                    self.progress.note(f"{st.system.name}: FAILED: {st.error}")
                    continue
                d = per[st.system.name]
                d["max_rps"].append(res["achieved_rate"])
                d["errors"] += res["errors"]
                d["requests"] += res["requests"]
                self.progress.note(f"{st.system.name}: max {res['achieved_rate']:,.0f} req/s")
                publish()
        maxes = {st.system.name: stats.summary(per[st.system.name]["max_rps"])["median"] for st in live
                 if st.ok and per[st.system.name]["max_rps"]}
        if not maxes:
            return
        ref_name, ref_max = self._rate_reference(maxes)
        wrec["rate_reference"] = ref_name
        wrec["rates"] = [round(ref_max * f, 1) for f in s.levels]
        # 2) constant-rate runs at the same absolute rates for every system, N repeats
        for r in range(s.repeat):
            for st in round_order(live, r):
                for frac, rate in zip(s.levels, wrec["rates"]):
                    if not st.ok or rate <= 0:
                        continue
                    self.progress.step(f"{self.sc.name}/{w.name}: {st.system.name} at {rate:,.0f} req/s "
                                       f"({frac:.0%}, repeat {r + 1}/{s.repeat})")
                    res = self._load(st, w, rate, s.duration, 0.0)
                    if res is None:
                        self.progress.note(f"{st.system.name}: FAILED: {st.error}")
                        continue
                    d = per[st.system.name]
                    lv = d["levels"].setdefault(frac, [])
                    lv.append(res)
                    d["errors"] += res["errors"]
                    d["requests"] += res["requests"]
                    pc = res["latency"]["corrected"]["percentiles_us"]
                    self.progress.note(f"{st.system.name}: p50 {pc['p50']} us, p99 {pc['p99']} us, "
                                       f"{res['errors']} errors")
                    publish()
        for st in live:
            if st.system.metrics and st.system.name in before and st.ok:
                after = promtext.scrape(substitute(st.system.metrics, st.values, s.bins))
                per[st.system.name]["metrics"] = promtext.delta(before[st.system.name], after)
        publish()

    def _rate_reference(self, maxes: dict[str, float]) -> tuple[str, float]:
        """The system whose median max sets the constant rates: the scenario's ``rate_reference`` when it
        was measured, else the slowest system (so every system can hold every rate)."""
        ref = self.sc.rate_reference
        if ref in maxes:
            return ref, maxes[ref]
        if ref is not None:
            self.progress.note(f"rate reference {ref} has no max: using the slowest system instead")
        name = min(maxes, key=maxes.get)
        return name, maxes[name]

    def _summarise(self, d: dict, rates: list[float]) -> dict:
        levels = []
        for frac, rate in zip(self.settings.levels, rates):
            runs = d["levels"].get(frac, [])
            if not runs:
                continue
            lat = {p: stats.summary([r["latency"]["corrected"]["percentiles_us"][p] for r in runs])
                   for p in PERCENTILES}
            ulat = {p: stats.summary([r["latency"]["uncorrected"]["percentiles_us"][p] for r in runs])
                    for p in ("p50", "p99")}
            levels.append({
                "fraction": frac, "target_rate": rate,
                "achieved_rate": stats.summary([r["achieved_rate"] for r in runs]),
                "errors": sum(r["errors"] for r in runs),
                "latency_us": lat, "uncorrected_latency_us": ulat,
                "spectrum": _merge_spectrum([r["latency"]["corrected"]["hdr"] for r in runs]),
            })
        return {"max_rps": stats.summary(d["max_rps"]), "errors": d["errors"], "requests": d["requests"],
                "levels": levels, "metrics": d["metrics"]}


def resolve_bins(cli_bins: dict) -> dict:
    """Binary name -> absolute path: ``--bin`` first, then PERFKIT_BIN_<NAME>, then PATH (lazily)."""

    class Bins(dict):
        def __missing__(self, name):
            env = os.environ.get("PERFKIT_BIN_" + name.upper().replace("-", "_").replace(".", "_"))
            path = env or shutil.which(name) or shutil.which(name, path="/usr/local/sbin:/usr/sbin:/sbin")
            if not path:
                raise KeyError(name)
            path = os.path.abspath(path)
            self[name] = path
            return path

    return Bins({k: os.path.abspath(v) for k, v in cli_bins.items()})
