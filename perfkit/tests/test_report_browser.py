"""report.html in a real browser: headless Chromium opens the file, every chart draws its plotly SVG with its
traces, the console shows no error and the page asks for nothing over the network (plotly.js is inlined).

Chromium is driven over the DevTools protocol (a websocket on a port it picks itself and writes to
DevToolsActivePort in its profile folder). Without /usr/bin/chromium the test is skipped, except under CI,
where that is a failure (tools/bazel installs it as a prerequisite)."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
from report_doc import results_document
from websockets.sync.client import connect

from perfkit import report_html

CHROMIUM = "/usr/bin/chromium"

# id -> (traces in the figure, traces drawn: the spectrum shows its highest rate, the others are legend entries)
EXPECTED = {
    "chart-webapp-json-latency-vs-rate": (7, 7),  # p50 and p99 of 3 systems, and the SLO
    "chart-webapp-json-spectrum": (9, 3),  # 3 systems at 3 rates
    "chart-webapp-json-timeline": (4, 4),  # 3 systems and the SLO
    "chart-webapp-json-cpu-per-request": (1, 1),
    "chart-webapp-json-throughput": (2, 2),  # sustainable and closed-loop max
    "chart-webapp-json-hot-paths": (2, 2),
    "chart-httpclient-ping-throughput": (1, 1),
}

CHARTS_JS = """({
  ready: document.readyState,
  charts: Array.from(document.querySelectorAll('.perfkit-chart')).map(el => ({
    id: el.id,
    svgs: el.querySelectorAll('.main-svg').length,
    traces: (el.data || []).length,
    drawn: el.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,
  })),
})"""


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


class DevTools:
    """A DevTools protocol client over one browser websocket; page commands go to a flattened session."""

    def __init__(self, ws):
        self.ws = ws
        self.last_id = 0
        self.events: list[dict] = []

    def _recv(self, deadline: float) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from Chromium")
        return json.loads(self.ws.recv(timeout=left))

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 15) -> dict:
        self.last_id += 1
        msg = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            m = self._recv(deadline)
            if m.get("id") == self.last_id:
                assert "error" not in m, f"{method}: {m['error']}"
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def evaluate(self, expression: str, session: str):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return res["result"].get("value")


@pytest.fixture
def chromium(tmp_path):
    """A headless Chromium with a fresh profile, and its DevTools websocket URL."""
    if not os.access(CHROMIUM, os.X_OK):
        if _in_ci():
            pytest.fail(f"{CHROMIUM} is missing (tools/bazel installs the chromium package)")
        pytest.skip(f"{CHROMIUM} is missing")
    profile = tmp_path / "profile"
    home = tmp_path / "home"
    profile.mkdir()
    home.mkdir()
    # its singleton socket goes to TMPDIR and a socket path has at most 107 bytes: Bazel's TEST_TMPDIR is longer
    short_tmp = tempfile.mkdtemp(prefix="perfkit-chromium-", dir="/tmp" if os.access("/tmp", os.W_OK) else None)
    # its own home: the test sandbox's may be missing or read-only, and nothing of a user's profile may leak in
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               TMPDIR=short_tmp)
    log = open(tmp_path / "chromium.log", "wb")
    # --disable-dev-shm-usage: shared memory in TMPDIR, as a sandbox's /dev/shm may be small or read-only
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            assert proc.poll() is None, f"Chromium exited ({proc.returncode}):\n{_tail(tmp_path)}"
            assert time.monotonic() < deadline, f"Chromium wrote no DevToolsActivePort:\n{_tail(tmp_path)}"
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        yield f"ws://127.0.0.1:{port}{path}"
    finally:
        # the test closes the browser; else its processes (in the session started above) are ended
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            try:
                if sig:
                    os.killpg(proc.pid, sig)
                proc.wait(timeout=5)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()
        shutil.rmtree(short_tmp, ignore_errors=True)


def _tail(tmp_path) -> str:
    return (tmp_path / "chromium.log").read_text(errors="replace")[-3000:]


def _console_errors(events: list[dict]) -> list[str]:
    out = []
    for m in events:
        p = m.get("params", {})
        if m["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                                 for a in p.get("args", [])))
        elif m["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif m["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
    return out


def test_every_chart_draws_without_console_errors(tmp_path, chromium):
    page = tmp_path / "report.html"
    page.write_text(report_html.render(results_document()), encoding="utf-8")

    with connect(chromium, max_size=None, open_timeout=15) as ws:
        dt = DevTools(ws)
        target = dt.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            dt.call(f"{domain}.enable", session=session)
        nav = dt.call("Page.navigate", {"url": page.as_uri()}, session)
        assert not nav.get("errorText"), nav

        # Plotly.newPlot may finish after the load event: wait for the whole page and every chart's SVG
        deadline = time.monotonic() + 60
        while True:
            state = dt.evaluate(CHARTS_JS, session)
            charts = state["charts"]
            if state["ready"] == "complete":
                if charts and all(c["svgs"] for c in charts):
                    break
                deadline = min(deadline, time.monotonic() + 10)  # loaded: the charts draw within moments
            assert time.monotonic() < deadline, f"the page did not finish: {state}"
            time.sleep(0.2)
        text = dt.evaluate("document.body.innerText", session)
        dt.evaluate("1", session)  # a last round trip: the events sent before it are in
        errors = _console_errors(dt.events)
        requests = [m["params"]["request"]["url"] for m in dt.events if m["method"] == "Network.requestWillBeSent"]
        try:
            dt.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - the fixture ends it anyway
            pass

    assert [c["id"] for c in charts] == list(EXPECTED), charts
    for c in charts:
        traces, drawn = EXPECTED[c["id"]]
        assert c["svgs"] >= 1, f"{c['id']} drew no plotly SVG: {c}"
        assert (c["traces"], c["drawn"]) == (traces, drawn), c
    assert errors == [], errors
    assert [u for u in requests if not u.startswith(("file:", "data:", "about:"))] == []
    # the tables are the results' own, rendered in the page
    assert "not held (achieved 8,123 req/s)" in text
    assert "⚠ 1,234 failed (timeout 1,000, 5xx 200, read_error 34)" in text
