"""End-to-end req/s: aquilia_app vs Sanic, FastAPI (uvicorn), BlackSheep (uvicorn) and raw ASGI/RSGI apps.

    python bench/bench_e2e.py [--duration 5] [--connections 50] [--peer-python PY] [--only a,b] [--json out.json]
                              [--peers PERFKIT_PEERS_DIR]

The peers are perfkit's (perfkit/peers: the same apps and payloads the monorepo bench runs); Bazel ships
them as data (//perfkit:peer_apps), and from a checkout they are found at ../../../perfkit/peers.

Every server runs one worker pinned to CPU 0 (``taskset -c 0``); the load, ``wrk -t1 -cC -dDs``, runs pinned
to CPU 1.  Each endpoint gets a 1 s warm-up run first.  Prints a Markdown table of req/s and the
ratio of aquilia_app's req/s to each peer's (same run, same machine).  Not a test: numbers only.
The perfkit bench runs the same comparison with perfkit-load (perfkit/scenarios/aquilia_app.toml).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# perfkit/peers, where it sits both in the source tree and in this binary's Bazel runfiles
DEFAULT_PEERS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "perfkit", "peers"))
ENDPOINTS = ["/ping", "/json", "/json-large", "/html"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def targets(py: str, peer_py: str, peers: str):
    aq = [py, "-m", "aquilia_app", "--workers", "1"]
    # the peers are started as perfkit's scenario starts them (perfkit/scenarios/aquilia_app.toml)
    uv = ["-m", "uvicorn", "--app-dir", peers, "--host", "127.0.0.1", "--loop", "uvloop", "--http", "httptools",
          "--no-access-log", "--log-level", "warning"]
    return {
        "aquilia_app": aq + ["--server", "granian"],  # through RSGI, the default
        "aquilia_app-nometrics": aq + ["--server", "granian", "--no-metrics"],
        "aquilia_app-asgi": aq + ["--server", "granian", "--interface", "asgi"],
        "aquilia_app-uvicorn": aq + ["--server", "uvicorn"],
        "raw-granian": [py, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--workers", "1",
                        "--loop", "uvloop", "--no-access-log", "--log-level", "warning", "--working-dir", peers,
                        "raw_asgi:app"],
        "raw-rsgi-granian": [py, "-m", "granian", "--interface", "rsgi", "--host", "127.0.0.1", "--workers", "1",
                             "--loop", "uvloop", "--no-access-log", "--log-level", "warning", "--working-dir", peers,
                             "raw_rsgi:app"],
        "raw-uvicorn": [py] + uv + ["raw_asgi:app"],
        "sanic": [peer_py, os.path.join(peers, "sanic_app.py")],
        "fastapi": [peer_py] + uv + ["fastapi_app:app"],
        "blacksheep": [peer_py] + uv + ["blacksheep_app:app"],
    }


def wait_ready(port: int, proc, timeout=30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /ping HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
                if s.recv(16).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server not ready")


def body_size(port: int, path: str) -> int:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return len(r.read())


def wrk(port: int, path: str, duration: float, connections: int, cpu: str) -> dict:
    cmd = ["taskset", "-c", cpu, "wrk", "-t1", f"-c{connections}", f"-d{duration:g}s", "--latency",
           f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = re.search(r"\s99%\s+([\d.]+)(us|ms|s)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock_err = re.search(r"Socket errors: (.*)", out)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    return {"rps": float(rps.group(1)) if rps else 0.0,
            "p99_ms": float(p99.group(1)) * scale[p99.group(2)] if p99 else None,
            "non2xx": int(errors.group(1)) if errors else 0,
            "socket_errors": sock_err.group(1) if sock_err else None}


def run_target(name, cmd, a) -> dict:
    port = free_port()
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "src"), a.peers] + [p for p in sys.path if p])
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(["taskset", "-c", a.server_cpu] + cmd + ["--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    res = {}
    try:
        wait_ready(port, proc)
        for path in a.endpoints:
            size = body_size(port, path)
            wrk(port, path, 1, a.connections, a.load_cpu)  # warm-up
            r = wrk(port, path, a.duration, a.connections, a.load_cpu)
            r["bytes"] = size
            res[path] = r
            print(f"  {name:24} {path:12} {r['rps']:10.0f} req/s  p99 {r['p99_ms']} ms  body {size} B"
                  + (f"  non-2xx {r['non2xx']}" if r["non2xx"] else ""), flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--peer-python", default=sys.executable, help="python with sanic/fastapi/blacksheep")
    ap.add_argument("--only", help="comma-separated target names")
    ap.add_argument("--endpoints", default=",".join(ENDPOINTS))
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--load-cpu", default="1")
    ap.add_argument("--rounds", type=int, default=1,
                    help="cycle through all targets N times and keep each one's best req/s (less noise from "
                         "other load on a shared machine)")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--peers", default=DEFAULT_PEERS, help="perfkit's peers folder (default: %(default)s)")
    a = ap.parse_args(argv)
    a.peers = os.path.abspath(a.peers)
    if not os.path.isfile(os.path.join(a.peers, "payloads.py")):
        ap.error(f"--peers: no perfkit peers (payloads.py) in {a.peers}")
    a.endpoints = a.endpoints.split(",")
    all_targets = targets(sys.executable, a.peer_python, a.peers)
    names = a.only.split(",") if a.only else list(all_targets)
    results: dict = {}
    for rnd in range(a.rounds):
        for name in names:
            print(f"{name} (round {rnd + 1}/{a.rounds}):", flush=True)
            try:
                res = run_target(name, all_targets[name], a)
            except Exception as e:
                print(f"  {name}: failed: {e}", flush=True)
                continue
            best = results.setdefault(name, {})
            for path, r in res.items():
                if path not in best or r["rps"] > best[path]["rps"]:
                    best[path] = r
    try:
        load = os.getloadavg()
        print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    except OSError:
        pass
    print()
    print("| target | " + " | ".join(a.endpoints) + " |")
    print("|---|" + "---:|" * len(a.endpoints))
    for name, res in results.items():
        print(f"| {name} | " + " | ".join(f"{res[p]['rps']:.0f}" if p in res else "-" for p in a.endpoints) + " |")
    ours = results.get("aquilia_app", {})
    if ours:
        print()
        print("| aquilia_app ÷ | " + " | ".join(a.endpoints) + " |")
        print("|---|" + "---:|" * len(a.endpoints))
        for name, res in results.items():
            if name == "aquilia_app":
                continue
            cells = []
            for p in a.endpoints:
                if p in res and p in ours and res[p]["rps"]:
                    cells.append(f"{ours[p]['rps'] / res[p]['rps']:.2f}")
                else:
                    cells.append("-")
            print(f"| {name} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"duration": a.duration, "connections": a.connections, "rounds": a.rounds, "server_cpu": a.server_cpu,
                       "load_cpu": a.load_cpu, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
