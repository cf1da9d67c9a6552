"""Client scenarios: one fast local server (pinned to the load CPU set), each client library driven
against it by ``client_driver.py`` in its own process (pinned to the systems' CPU set), N repeats (rounds over
the clients, every other round reversed: ``runner.round_order``).
Recorded per client: req/s (back to back on one connection), latency percentiles, errors, peak RSS and
CPU time of the driver process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from . import stats
from .procs import Proc, StartError
from .runner import Settings, Started, cacert_of, round_order, start_system, version_of
from .scenarios import Scenario, Workload

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client_driver.py")


class DriverError(RuntimeError):
    pass


def cache_dir() -> str:
    """Where hand-built, opt-in client environments live: $PERFMONO_CACHE, else ~/.cache/perfmono."""
    return os.environ.get("PERFMONO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "perfmono")


def environment_site(name: str) -> str:
    """The site-packages folder of the Python environment ``name`` (a pip_lock_repository, e.g. pypi_niquests).

    ``PERFKIT_ENV_<NAME>`` wins (a folder, for runs outside Bazel); else ``<runfiles>/<name>/site``, where the
    runfiles root is taken from RUNFILES_DIR / TEST_SRCDIR or from the bench's own ``<runfiles>/pypi/site``
    entry of sys.path (Bazel ships the environment as data of //perfkit:bench, never as an import path); else
    ``<cache_dir>/envs/<name>/site`` (opt-in environments built by a script, never by Bazel).
    """
    override = os.environ.get("PERFKIT_ENV_" + name.upper())
    cache = os.path.join(cache_dir(), "envs", name, "site")
    if override:
        if os.path.isdir(override):
            return os.path.abspath(override)
        raise DriverError(f"environment {name}: PERFKIT_ENV_{name.upper()}={override} is not a folder")
    roots = [os.environ.get("RUNFILES_DIR"), os.environ.get("TEST_SRCDIR")]
    roots += [os.path.dirname(os.path.dirname(p)) for p in sys.path if os.path.basename(p) == "site"]
    for root in roots:
        if root and os.path.isdir(os.path.join(root, name, "site")):
            return os.path.join(root, name, "site")
    if os.path.isdir(cache):  # an opt-in environment built by hand (see the scenario's `build`)
        return cache
    raise DriverError(f"environment {name} not found: add @{name} to the data of the bench target, "
                      f"or set PERFKIT_ENV_{name.upper()} to its site-packages folder")


def driver_command(client: str, environment: str = "") -> tuple[list[str], dict | None]:
    """The interpreter command line and environment variables the driver of ``client`` runs with.

    Without an environment the driver inherits the bench's import path. With one it gets a fresh interpreter:
    -S (no site-packages of the interpreter, no .pth files) and -s, and PYTHONPATH = that environment's folder
    only, so e.g. niquests' urllib3-future never meets the bench's urllib3.
    """
    if not environment:
        return [sys.executable, DRIVER, "--client", client], None
    site = environment_site(environment)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = site
    env["PYTHONNOUSERSITE"] = "1"
    return [sys.executable, "-S", "-s", DRIVER, "--client", client], env


def drive(client: str, url: str, w: Workload, settings: Settings, environment: str = "",
          cacert: str | None = None) -> dict:
    base, env = driver_command(client, environment)
    cmd = base + ["--url", url, "--method", w.method,
                  "--duration", str(settings.duration), "--warmup", str(min(settings.warmup, 0.5))]
    if w.body is not None:
        cmd += ["--body", w.body]
    if cacert:
        cmd += ["--cacert", cacert]
    try:
        proc = Proc(f"driver-{client}", cmd, env=env, cpus=settings.sut_cpus)
    except StartError as e:
        raise DriverError(str(e)) from None
    try:
        try:
            status = proc.popen.wait(settings.duration + 60)
        except subprocess.TimeoutExpired:
            raise DriverError(f"the {client} driver did not finish in time") from None
        tail = proc.log_tail(10)
        if status != 0:
            raise DriverError(f"the {client} driver exited with status {status}: {tail}")
        for line in reversed(tail.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise DriverError(f"the {client} driver printed no result: {tail}")
    finally:
        proc.stop()
        try:
            os.unlink(proc.log_path)
        except OSError:
            pass


class ClientRun:
    def __init__(self, scenario: Scenario, members: list[str] | None, settings: Settings, progress):
        self.sc = scenario
        self.settings = settings
        self.progress = progress
        self.clients = [c for c in scenario.clients if members is None or c.name in members]
        self.record: dict = {"name": scenario.name, "kind": "client", "description": scenario.description,
                             "status": "ok", "server": {}, "systems": [], "workloads": []}

    def steps(self) -> int:
        return 1 + len(self.sc.workloads_for(self.settings.suite)) * self.settings.repeat * len(self.clients)

    def run(self) -> dict:
        s = self.settings
        server = Started(self.sc.server)
        sysrec = {c.name: {"name": c.name, "role": c.role, "description": c.description, "client": c.client,
                           "version": version_of(c.version, s.bins, {}), "status": "ok", "error": "",
                           "log_tail": "", "command": [], "port": 0, "peak_rss_bytes": 0, "cpu_seconds": 0.0,
                           "environment": c.environment or "main", "urllib3": ""}
                  for c in self.clients}
        self.record["systems"] = list(sysrec.values())
        for c in self.clients:
            if c.build:
                try:
                    environment_site(c.environment)
                except DriverError:
                    how = c.build.replace("${python}", sys.executable)
                    sysrec[c.name].update(status="skipped", error=f"skipped: not built, run {how}")
                    self.progress.note(f"{c.name}: skipped: not built, run {how}")
        try:
            self.progress.step(f"{self.sc.name}: start server {self.sc.server.name}")
            start_system(server, s, s.load_cpus)
            if not server.ok:
                self.progress.note(f"{self.sc.server.name}: FAILED: {server.error}")
                self.record["status"] = "failed"
                for r in sysrec.values():
                    r.update(status="failed", error=f"server {self.sc.server.name} failed: {server.error}")
                return self.record
            for w in self.sc.workloads_for(s.suite):
                if w.tls:  # the server's https port, verified against the run's CA
                    url, cacert = f"https://127.0.0.1:{server.values['tls_port']}{w.path}", cacert_of(server)
                else:
                    url, cacert = f"http://127.0.0.1:{server.port}{w.path}", None
                per = {c.name: [] for c in self.clients}
                wrec = {"name": w.name, "mode": "http", "method": w.method, "path": w.path, "connections": 1,
                        "rates": [], "results": {}}
                self.record["workloads"].append(wrec)
                wrec["order"] = [[c.name for c in round_order(self.clients, r)] for r in range(s.repeat)]
                for r in range(s.repeat):
                    for c in round_order(self.clients, r):
                        rec = sysrec[c.name]
                        if rec["status"] != "ok":
                            continue
                        self.progress.step(f"{self.sc.name}/{w.name}: {c.name} (repeat {r + 1}/{s.repeat})")
                        try:
                            res = drive(c.client, url, w, s, c.environment, cacert)
                        except DriverError as e:
                            rec.update(status="failed", error=str(e).splitlines()[0][:300], log_tail=str(e))
                            self.progress.note(f"{c.name}: FAILED: {rec['error']}")
                            continue
                        per[c.name].append(res)
                        rec["peak_rss_bytes"] = max(rec["peak_rss_bytes"], res["peak_rss_bytes"])
                        rec["cpu_seconds"] = round(rec["cpu_seconds"] + res["cpu_seconds"], 3)
                        if res.get("version") and (c.environment or rec["version"] in ("", "unknown", "not installed")):
                            rec["version"] = res["version"]  # a separate environment: only its driver knows
                        rec["urllib3"] = res.get("urllib3", "")
                        self.progress.note(f"{c.name}: {res['rps']:,.0f} req/s, p99 {res['latency_us']['p99']} us")
                        wrec["results"] = {n: self._summarise(v) for n, v in per.items() if v}
        finally:
            server.stop()
            self.record["server"] = server.record()
            states = [r["status"] for r in sysrec.values()]
            if self.record["status"] == "ok" and "failed" in states:
                self.record["status"] = "partial" if "ok" in states else "failed"
        return self.record

    @staticmethod
    def _summarise(runs: list[dict]) -> dict:
        lat = {p: stats.summary([r["latency_us"][p] for r in runs]) for p in ("p50", "p90", "p99", "p99_9", "max")}
        return {"max_rps": stats.summary([r["rps"] for r in runs]), "errors": sum(r["errors"] for r in runs),
                "requests": sum(r["requests"] for r in runs), "latency_us": lat, "levels": [], "metrics": {}}
