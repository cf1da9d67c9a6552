"""The perfkit-load engine as a subprocess: one run = one process, its ``--json`` result parsed.

The engine's result format is perfkit/load/result.schema.json (latencies in microseconds; the
histograms as base64 HdrHistogram V2 compressed encodings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from . import promsd
from .procs import Proc, StartError


DRAIN_S = 1.0


class LoadError(RuntimeError):
    """A load run failed (the engine's own message is in the text)."""


def engine_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "unknown"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def run(binary: str, url: str, *, mode: str = "http", method: str = "GET", body: str | None = None,
        headers: tuple[str, ...] = (), connections: int = 16, duration: float = 2.0, warmup: float = 0.0,
        rate: float | None = None, cpus: str | None = None, scenario: str = "default",
        metrics_addr: str | None = None, timeout_s: float = 2.0, sd_dir: str | None = None,
        service: str = "", cacert: str | None = None) -> dict:
    """Run the engine once: closed loop when ``rate`` is None (``--max``), else constant rate.

    With ``metrics_addr`` and ``sd_dir``, a Prometheus target file names the run's metrics address with the labels
    job=perfkit_load and service=``service`` (the system it aims at) while the engine runs (promsd)."""
    fd, out_path = tempfile.mkstemp(prefix="perfkit-load-", suffix=".json")
    os.close(fd)
    # --drain: the answers still in flight at the end are waited for (briefly), so a healthy run does not
    # count its last requests as unfinished failures
    cmd = [binary, "-t", "1", "-c", str(connections), "-d", f"{duration}s", "--warmup", f"{warmup}s",
           "--timeout", f"{timeout_s}s", "--drain", f"{DRAIN_S}s", "--scenario", scenario, "--json", out_path]
    cmd += ["--max"] if rate is None else ["-R", f"{rate:.3f}"]
    if mode == "ws":
        cmd.append("--ws")
        if body:
            cmd += ["--body", body]
    else:
        cmd += ["--method", method]
        if body is not None:
            cmd += ["--body", body]
    for h in headers:
        cmd += ["-H", h]
    if cacert:
        cmd += ["--cacert", cacert]
    if metrics_addr:
        cmd += ["--metrics-addr", metrics_addr]
    cmd.append(url)
    sd = None
    if metrics_addr and sd_dir:
        try:
            sd = promsd.register_load(sd_dir, metrics_addr, service or "unknown")
        except OSError as e:  # monitoring is a bystander: the run goes on
            print(f"perfkit: no Prometheus target file for the load run: {e}", file=sys.stderr)
    try:
        proc = Proc("perfkit-load", cmd, cpus=cpus)
    except StartError as e:
        if sd:
            sd.remove()
        raise LoadError(str(e)) from None
    try:
        try:
            status = proc.popen.wait(duration + warmup + timeout_s + DRAIN_S + 30)
        except subprocess.TimeoutExpired:
            raise LoadError(f"perfkit-load did not finish in time: {proc.log_tail(5)}") from None
        if status != 0:
            raise LoadError(f"perfkit-load exited with status {status}: {proc.log_tail(5)}")
        try:
            with open(out_path) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise LoadError(f"perfkit-load wrote no readable JSON result: {e}") from None
    finally:
        proc.stop()
        if sd:
            sd.remove()
        for p in (out_path, proc.log_path):
            try:
                os.unlink(p)
            except OSError:
                pass
