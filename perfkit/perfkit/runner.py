"""The method, per server scenario and workload:

1. start every system of the scenario pinned to the systems' CPU set, wait until each is ready (a system given
   by ``url`` is already running: it is only waited for);
2. warm-up, then a closed-loop saturation probe (``perfkit-load --max``) per system, N repeats → max req/s;
   the repeats are rounds over every system, every other round in reverse order (``round_order``), so no
   system is always measured right after the same neighbour or always first. A probe in which the load
   engine's own CPU was saturated marks the max "load-generator bound";
3. constant-rate runs at 50/75/90 % of the *slowest* system's median max (or of the scenario's
   ``rate_reference`` system's) — the same absolute rates for every system, so their corrected latencies
   compare — N repeats each, with the server's CPU time per completed request read from /proc around each;
4. the headline, sustainable throughput: per system, a bisection over constant-rate runs for the highest
   offered rate it holds (achieved >= 99 % of the target, the engine's schedule held, no error answer)
   with corrected p99 within the workload's SLO; the constant-rate runs of step 3 bound it first;
5. /metrics scraped before and after each system's share of the workload (hot-path breakdown);
6. peak RSS and CPU time sampled from /proc; everything stopped cleanly.

Failed answers (transport errors, timeouts, unfinished requests, non-2xx, JSON-RPC errors) are errors.
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

from . import loadgen, promsd, promtext, stats
from .procs import Proc, StartError, free_port, wait_ready
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
    search_steps: int = 3  # bisection steps of the sustainable-throughput search
    load_bin: str = "perfkit-load"
    bins: dict = field(default_factory=dict)
    peers_dir: str = ""
    sut_cpus: str | None = None
    load_cpus: str | None = None
    metrics_addr: str | None = None
    # Prometheus target files (promsd): a file per running system with a metrics URL and per load run
    prom_sd_dir: str | None = None
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
        self.sd: promsd.Registration | None = None  # its Prometheus target file, while it runs

    def stop(self) -> None:
        """Withdraw the target file (Prometheus stops scraping it rather than see it down), then stop it."""
        if self.sd:
            self.sd.remove()
            self.sd = None
        if self.proc:
            self.proc.stop()

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
    if s.tls:
        try:
            st.values["tls_cert"], st.values["tls_key"], st.values["tls_ca"] = make_certificate(tmp)
            st.values["tls_port"] = free_port()  # a client scenario's server: https beside plain ${port}
        except (OSError, subprocess.SubprocessError) as e:
            st.fail(f"cannot make a TLS certificate with openssl: {e}")
            return
    st.version = version_of(s.version, settings.bins, st.values)
    if s.url:
        st.command = []
        try:
            wait_ready(s.name, s.ready, s.ready_timeout_s)
        except StartError as e:
            st.fail(str(e))
        _register_target(st, settings)
        return
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
    _register_target(st, settings)


def _register_target(st: Started, settings: Settings) -> None:
    """With ``settings.prom_sd_dir``: a Prometheus target file for a ready system that has a metrics URL."""
    if not (settings.prom_sd_dir and st.ok and st.system.metrics):
        return
    try:
        url = substitute(st.system.metrics, st.values, settings.bins)
        st.sd = promsd.register_system(settings.prom_sd_dir, st.system.name, url)
    except (OSError, ValueError, KeyError) as e:  # monitoring is a bystander: the bench goes on
        print(f"perfkit: no Prometheus target file for {st.system.name}: {e}", file=sys.stderr)


def make_certificate(folder: str) -> tuple[str, str, str]:
    """A CA and a certificate it signs for localhost and 127.0.0.1 (P-256, 2 days), made by the openssl command in
    ``folder``: (certificate, its key, the CA certificate that the load engine trusts). A self-signed server
    certificate would not do: rustls refuses a CA certificate used as the server's own."""
    ca, ca_key = os.path.join(folder, "ca.pem"), os.path.join(folder, "ca.key")
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"]
    for args in (["-keyout", ca_key, "-out", ca, "-subj", "/CN=perfkit bench CA"],
                 ["-keyout", key, "-out", cert, "-subj", "/CN=localhost", "-CA", ca, "-CAkey", ca_key,
                  "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE"]):
        subprocess.run(["openssl", "req", "-x509", *ec, *args], check=True, capture_output=True, timeout=30)
    return cert, key, ca


def cacert_of(st: Started) -> str | None:
    """The certificate the load engine must trust to reach ``st`` (None: plain HTTP)."""
    return st.values.get("tls_ca") if st.system.tls else None


def workload_url(st: Started, w: Workload) -> str:
    scheme = ("wss" if w.mode == "ws" else "https") if st.system.tls else ("ws" if w.mode == "ws" else "http")
    if st.system.url:
        return scheme + st.system.url[len("http"):] + w.path
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
        s = self.settings
        per_workload = s.repeat * (1 + len(s.levels)) + s.search_steps
        runs = sum(st.system.serves(w.name) for st in self.started for w in self.sc.workloads_for(s.suite))
        return len(self.started) + runs * per_workload

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
                st.stop()
            self.record["systems"] = [st.record() for st in self.started]
            if any(not st.ok for st in self.started):
                self.record["status"] = "partial" if any(st.ok for st in self.started) else "failed"
        return self.record

    def _load(self, st: Started, w: Workload, rate: float | None, duration: float, warmup: float) -> dict | None:
        """One load run; the result gets ``server_cpu_s``: the system's CPU time during it (None: not measured)."""
        s = self.settings
        cpu0 = self._cpu(st)
        try:
            res = loadgen.run(s.load_bin, workload_url(st, w), mode=w.mode, method=w.method, body=w.body,
                              headers=w.headers, connections=w.connections, duration=duration, warmup=warmup,
                              rate=rate, cpus=s.load_cpus, scenario=f"{self.sc.name}/{w.name}/{st.system.name}",
                              metrics_addr=s.metrics_addr or (f"127.0.0.1:{free_port()}" if s.prom_sd_dir else None),
                              sd_dir=s.prom_sd_dir, service=st.system.name, cacert=cacert_of(st))
        except loadgen.LoadError as e:
            if self._check_alive(st):
                st.fail(f"load run failed: {e}")
            return None
        cpu1 = self._cpu(st)
        if not self._check_alive(st):
            return None
        res["server_cpu_s"] = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        return res

    @staticmethod
    def _cpu(st: Started) -> float | None:
        if not st.proc:
            return None
        st.proc.sample()
        return st.proc.cpu_seconds

    def _workload(self, w: Workload) -> None:
        s = self.settings
        wrec = {"name": w.name, "mode": w.mode, "method": w.method, "path": w.path,
                "connections": w.connections, "slo_p99_us": w.slo_p99_us, "rates": [], "cpu_rate": None,
                "results": {}}
        self.record["workloads"].append(wrec)
        live = [st for st in self.started if st.ok and st.system.serves(w.name)]
        per = {st.system.name: _Tally() for st in live}
        before = {st.system.name: promtext.scrape(substitute(st.system.metrics, st.values, s.bins))
                  for st in live if st.system.metrics}

        def publish():
            wrec["results"] = {name: self._summarise(t, wrec) for name, t in per.items()}

        wrec["order"] = [[st.system.name for st in round_order(live, r)] for r in range(s.repeat)]
        self._probes(w, live, per, publish)
        maxes = {st.system.name: stats.summary(per[st.system.name].max_rps)["median"] for st in live
                 if st.ok and per[st.system.name].max_rps}
        if not maxes:
            return
        ref_name, ref_max = self._rate_reference(maxes)
        wrec["rate_reference"] = ref_name
        wrec["rates"] = [round(ref_max * f, 1) for f in s.levels]
        self._levels(w, live, per, wrec["rates"], publish)
        wrec["cpu_rate"] = self._cpu_rate(per, wrec["rates"])
        for st in live:
            if st.ok and st.system.name in maxes:
                self._search(st, w, per[st.system.name], maxes[st.system.name], wrec["rates"], publish)
        for st in live:
            if st.system.metrics and st.system.name in before and st.ok:
                after = promtext.scrape(substitute(st.system.metrics, st.values, s.bins))
                per[st.system.name].metrics = promtext.delta(before[st.system.name], after)
        publish()

    def _probes(self, w: Workload, live: list[Started], per: dict, publish) -> None:
        """Warm-up and the closed-loop saturation probe, N repeat rounds."""
        s = self.settings
        for r in range(s.repeat):
            for st in round_order(live, r):
                if not st.ok:
                    continue
                self.progress.step(f"{self.sc.name}/{w.name}: probe {st.system.name} (repeat {r + 1}/{s.repeat})")
                res = self._load(st, w, None, s.probe, s.warmup if r == 0 else min(s.warmup, 0.5))
                if res is None:
                    self.progress.note(f"{st.system.name}: FAILED: {st.error}")
                    continue
                t = per[st.system.name]
                t.count(res)
                t.max_rps.append(res["achieved_rate"])
                t.engine_busy.append(res.get("engine", {}).get("busiest_thread", 0.0))
                t.engine_bound |= engine_saturated(res)
                bound = " (load-generator bound)" if engine_saturated(res) else ""
                self.progress.note(f"{st.system.name}: max {res['achieved_rate']:,.0f} req/s{bound}")
                publish()

    def _levels(self, w: Workload, live: list[Started], per: dict, rates: list[float], publish) -> None:
        """Constant-rate runs at the same absolute rates for every system, N repeat rounds."""
        s = self.settings
        for r in range(s.repeat):
            for st in round_order(live, r):
                for frac, rate in zip(s.levels, rates):
                    if not st.ok or rate <= 0:
                        continue
                    self.progress.step(f"{self.sc.name}/{w.name}: {st.system.name} at {rate:,.0f} req/s "
                                       f"({frac:.0%}, repeat {r + 1}/{s.repeat})")
                    res = self._load(st, w, rate, s.duration, 0.0)
                    if res is None:
                        self.progress.note(f"{st.system.name}: FAILED: {st.error}")
                        continue
                    t = per[st.system.name]
                    t.count(res, skip=("unfinished",) if held_rate(res, rate) else ())
                    t.levels.setdefault(frac, []).append(res)
                    self.progress.note(f"{st.system.name}: {run_line(res, rate)}")
                    publish()

    def _cpu_rate(self, per: dict, rates: list[float]) -> float | None:
        """The highest shared rate every system held (CPU per request compares there), else the lowest."""
        def all_held(frac, rate):
            return all(t.levels.get(frac) and all(held_rate(res, rate) for res in t.levels[frac])
                       for t in per.values())
        held = [rate for frac, rate in zip(self.settings.levels, rates) if all_held(frac, rate)]
        return max(held) if held else (min(rates) if rates else None)

    def _search(self, st: Started, w: Workload, t: "_Tally", max_rps: float, rates: list[float], publish) -> None:
        """Bisect for the highest rate sustained within the SLO, bounded first by the shared-rate runs."""
        s = self.settings
        ran = [(rate, t.levels[frac]) for frac, rate in zip(s.levels, rates) if t.levels.get(frac)]
        lo = max([rate for rate, runs in ran if all(sustained(r, rate, w.slo_p99_us) for r in runs)], default=0.0)
        # a shared rate that failed below one that was sustained was the machine's hiccup, not the limit
        failed = sorted(rate for rate, _ in ran if rate > lo)
        # A failed shared rate below the system's closed-loop max may be a hiccup too (a stall on a noisy
        # host): it is run once more before it bounds the search, or one bad run caps the system there.
        while failed and failed[0] < max_rps:
            ok = self._search_run(st, w, t, failed[0], "retest of a shared rate", publish, retest=True)
            if ok is None:
                return
            if not ok:
                break
            lo = failed.pop(0)
        hi = min(failed + [max(max_rps * 1.1, lo * 1.1)])
        t.search_bounds = (lo, hi)
        for k in range(s.search_steps):
            if hi <= lo * 1.01:
                break
            rate = round((lo + hi) / 2 if lo > 0 else hi / 2, 1)
            ok = self._search_run(st, w, t, rate, f"step {k + 1}/{s.search_steps}", publish)
            if ok is None:
                return
            lo, hi = (rate, hi) if ok else (lo, rate)
        t.sustainable = lo or None

    def _search_run(self, st: Started, w: Workload, t: "_Tally", rate: float, what: str, publish,
                    retest: bool = False) -> bool | None:
        """One run of the search at ``rate``: sustained or not, None when the system failed."""
        self.progress.step(f"{self.sc.name}/{w.name}: {st.system.name} SLO search at {rate:,.0f} req/s "
                           f"({what}, p99 <= {w.slo_p99_us / 1000:g} ms)")
        res = self._load(st, w, rate, self.settings.duration, 0.0)
        if res is None:
            self.progress.note(f"{st.system.name}: FAILED: {st.error}")
            return None
        # a step above the limit leaves requests unanswered by design: only other failures are errors
        t.count(res, skip=OVERLOAD_OUTCOMES)
        ok = sustained(res, rate, w.slo_p99_us)
        t.steps.append(search_step(res, rate, ok) | ({"retest": True} if retest else {}))
        self.progress.note(f"{st.system.name}: {run_line(res, rate)} -> {'sustained' if ok else 'not sustained'}")
        publish()
        return ok

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

    def _summarise(self, t: "_Tally", wrec: dict) -> dict:
        rates, slo = wrec["rates"], wrec["slo_p99_us"]
        levels = [level_summary(frac, rate, t.levels[frac]) for frac, rate in zip(self.settings.levels, rates)
                  if t.levels.get(frac)]
        at_cpu_rate = next((lv for lv in levels if lv["target_rate"] == wrec.get("cpu_rate")), None)
        return {"max_rps": stats.summary(t.max_rps), "errors": t.failed, "requests": t.requests,
                "failures": {k: v for k, v in t.failures.items() if v}, "load_generator_bound": t.engine_bound,
                "probe_engine_busy": stats.summary(t.engine_busy),
                "sustainable": {"rate": t.sustainable, "slo_p99_us": slo, "steps": t.steps,
                                "bounds": list(t.search_bounds) if t.search_bounds else None,
                                "engine_bound": any(st["engine_saturated"] and not st["ok"] for st in t.steps)},
                "cpu_per_request_us": at_cpu_rate["cpu_per_request_us"] if at_cpu_rate else None,
                "levels": levels, "metrics": t.metrics}


class _Tally:
    """What one system's runs of one workload gave so far."""

    def __init__(self):
        self.max_rps: list[float] = []
        self.engine_bound = False
        self.engine_busy: list[float] = []  # per probe: the load engine's busiest thread, CPU time / wall time
        self.failed = 0
        self.requests = 0
        self.failures: dict[str, int] = {}
        self.levels: dict[float, list[dict]] = {}  # fraction of the reference's max -> runs at that rate
        self.steps: list[dict] = []
        self.search_bounds: tuple[float, float] | None = None
        self.sustainable: float | None = None
        self.metrics: dict = {}

    def count(self, res: dict, skip: tuple[str, ...] = ()) -> None:
        """Add a run's answers and failed answers (leaving out the outcomes in ``skip``)."""
        self.requests += res["requests"]
        for outcome, n in res["outcomes"].items():
            if outcome not in SUCCESS_OUTCOMES and outcome not in skip and n:
                self.failures[outcome] = self.failures.get(outcome, 0) + n
                self.failed += n


# perfkit-load's outcomes that are answers a client wanted (3xx counts as failed: the bench asks for 2xx)
SUCCESS_OUTCOMES = ("2xx", "rpc_ok")
# what overload leaves behind: requests not answered in time
OVERLOAD_OUTCOMES = ("unfinished", "timeout")


def engine_saturated(res: dict) -> bool:
    return bool(res.get("engine", {}).get("saturated"))


def held_rate(res: dict, rate: float) -> bool:
    """The run held its offered rate: the engine's schedule held and >= 99 % of the target answered."""
    return bool(res.get("rate_held", True)) and res["achieved_rate"] >= 0.99 * rate


def sustained(res: dict, rate: float, slo_us: int) -> bool:
    """Held, within the SLO, and not one error answer. Requests a held run had not sent when it ended (a
    moment's lag at the stop) are not errors: they are within the 1 % a held run may leave unanswered, and
    their latency, from the intended time to the stop, is in the corrected histogram."""
    p99 = res["latency"]["corrected"]["percentiles_us"]["p99"]
    return held_rate(res, rate) and p99 <= slo_us and res["failed"] == res["outcomes"].get("unfinished", 0)


def search_step(res: dict, rate: float, ok: bool) -> dict:
    pc = res["latency"]["corrected"]["percentiles_us"]
    return {"rate": rate, "achieved": round(res["achieved_rate"], 1), "held": held_rate(res, rate),
            "p50_us": pc["p50"], "p99_us": pc["p99"], "failed": res["failed"],
            "engine_saturated": engine_saturated(res), "ok": ok}


def run_line(res: dict, rate: float) -> str:
    pc = res["latency"]["corrected"]["percentiles_us"]
    held = "" if held_rate(res, rate) else f", NOT HELD (achieved {res['achieved_rate']:,.0f} req/s)"
    return f"p50 {pc['p50']} us, p99 {pc['p99']} us, {res['failed']} failed{held}"


def cpu_per_request_us(res: dict) -> float | None:
    cpu = res.get("server_cpu_s")
    return None if cpu is None or not res["requests"] else cpu * 1e6 / res["requests"]


def timeline(res: dict) -> list[dict]:
    return [{"t_s": iv["start_s"], "rate": iv["rate"], "p50_us": iv["percentiles_us"]["p50"],
             "p99_us": iv["percentiles_us"]["p99"], "failed": iv["failed"]} for iv in res.get("intervals", [])]


def level_summary(frac: float, rate: float, runs: list[dict]) -> dict:
    lat = {p: stats.summary([r["latency"]["corrected"]["percentiles_us"][p] for r in runs]) for p in PERCENTILES}
    ulat = {p: stats.summary([r["latency"]["uncorrected"]["percentiles_us"][p] for r in runs]) for p in ("p50", "p99")}
    cpu = [c for c in (cpu_per_request_us(r) for r in runs) if c is not None]
    return {
        "fraction": frac, "target_rate": rate,
        "achieved_rate": stats.summary([r["achieved_rate"] for r in runs]),
        "held": all(held_rate(r, rate) for r in runs),
        "errors": sum(r["failed"] for r in runs),
        "engine_saturated": any(engine_saturated(r) for r in runs),
        "cpu_per_request_us": stats.summary(cpu) if cpu else None,
        "latency_us": lat, "uncorrected_latency_us": ulat,
        "spectrum": _merge_spectrum([r["latency"]["corrected"]["hdr"] for r in runs]),
        "timeline": timeline(runs[-1]),
    }


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
