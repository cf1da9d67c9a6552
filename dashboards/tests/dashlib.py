"""Helpers shared by the dashboards tests: paths, the committed dashboards, their queries, processes."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from perfkit.procs import free_port  # noqa: F401  (the repo's one free_port; the tests import it from here)

# abspath, not resolve(): under Bazel the test runs in a runfiles tree of symlinks; stay inside it.
DASH = Path(os.path.abspath(__file__)).parent.parent
PROM_DIR = DASH / "prometheus"
GRAFANA_DIR = DASH / "grafana"
DASHBOARDS_DIR = GRAFANA_DIR / "dashboards"

# What the variables of the dashboards are replaced with when a test runs a panel's query itself.
RATE_INTERVAL = "5s"  # Grafana's $__rate_interval for a 1 s scrape interval is 4 s or more


def promtool() -> str:
    """The promtool executable, or a clear failure."""
    path = os.environ.get("PROMTOOL") or shutil.which("promtool") or (
        "/usr/bin/promtool" if os.path.exists("/usr/bin/promtool") else None)
    if not path:
        raise AssertionError(
            "promtool not found (PATH, /usr/bin/promtool or $PROMTOOL): install Debian's `prometheus` package "
            "(apt-get install -y --no-install-recommends prometheus); tools/bazel installs it on first use")
    return path


def prometheus_bin() -> str:
    path = os.environ.get("PROMETHEUS") or shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
    if not path:
        raise AssertionError(
            "prometheus not found (PATH, /usr/bin/prometheus or $PROMETHEUS): install Debian's `prometheus` "
            "package (apt-get install -y --no-install-recommends prometheus)")
    return path


def load_dashboards() -> dict[str, dict]:
    out = {}
    for p in sorted(DASHBOARDS_DIR.glob("*.json")):
        with open(p, encoding="utf-8") as f:
            out[p.name] = json.load(f)
    assert out, f"no dashboards in {DASHBOARDS_DIR}"
    return out


def iter_panels(dash: dict):
    """Every panel, including those nested in collapsed rows."""
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []) or []:
            yield q


def query_panels(dash: dict):
    """Panels that run queries (everything but rows and text)."""
    return [p for p in iter_panels(dash) if p.get("type") not in ("row", "text")]


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace the dashboard variables ($x, ${x}, ${x:regex}) and Grafana's globals in a query."""
    values = {"__rate_interval": RATE_INTERVAL, "__interval": RATE_INTERVAL, "__range": "1m", **values}

    def rep(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(f"no value for the variable ${name} in {expr!r}")
        return values[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", rep, expr)


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited with {proc.returncode} before {url} answered")
        try:
            http_get(url, timeout=1.0)
            return
        except (urllib.error.URLError, OSError) as exc:
            last = exc
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout} s: {last}")


def start_and_read_port(cmd: list[str], pattern: str, timeout: float, log: Path, env=None) -> tuple[subprocess.Popen, int]:
    """Start a server that prints its bound port; return the process and the port."""
    logf = open(log, "w+b")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern.encode())
    seen = b""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if sel.select(timeout=0.2):
                line = proc.stdout.readline()
                if not line:
                    break
                seen += line
                m = rx.search(line)
                if m:
                    # keep draining stdout so the server never blocks on a full pipe
                    import threading

                    threading.Thread(target=_drain, args=(proc.stdout, logf), daemon=True).start()
                    return proc, int(m.group(1))
            elif proc.poll() is not None:
                break
    finally:
        sel.close()
    stop(proc)
    logf.seek(0)
    raise AssertionError(f"{cmd[0]} did not print its port ({pattern!r}) within {timeout} s; "
                         f"stdout: {seen[-2000:]!r}; stderr: {logf.read()[-2000:]!r}")


def _drain(stream, sink) -> None:
    for line in iter(stream.readline, b""):
        try:
            sink.write(line)
        except ValueError:
            return


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def prom_api(base: str, path: str, params: dict) -> dict:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    try:
        body = http_get(url, timeout=10)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{url}: HTTP {exc.code}: {exc.read()[:500]!r}") from None
    doc = json.loads(body)
    assert doc.get("status") == "success", f"{url}: {doc}"
    return doc["data"]


def has_finite_value(data: dict) -> bool:
    """Whether a query_range / query answer holds at least one number (NaN and ±Inf do not count)."""
    rows = data.get("result", [])
    for r in rows:
        for _, v in r.get("values", []) + ([r["value"]] if "value" in r else []):
            if v not in ("NaN", "+Inf", "-Inf"):
                return True
    return False
