"""Real WebSocket bench: rpc_app (picows and websockets stacks), raw echo servers on each stack,
rpc_app's Channels adapter and channels-rpc 1.0.1, both on daphne. Load: perfkit-load's WebSocket
mode (give its path with --load or PERFKIT_LOAD). Server pinned to CPU 0, load to CPU 1.

For each target: closed-loop saturation (--max), then constant-rate runs at fractions of it;
reported: the highest rate held with corrected p99 < 10 ms.

    python bench/bench_ws.py --load PATH/perfkit-load [--targets ...] [--duration 5]
    python bench/bench_ws.py --large      # 2 MB result: MB/s to the client, compressed and not
    python bench/bench_ws.py --idle 5000  # memory per idle connection
"""

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
ADD = '{"jsonrpc":"2.0","method":"add","params":[1,2]}'


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([ROOT, HERE] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    return e


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(cpu):
    return ["taskset", "-c", str(cpu)] if shutil.which("taskset") and os.cpu_count() > 1 else []


TARGETS = {
    "rpc_app_picows": lambda p: ([PY, "-m", "rpc_app", "--server", "picows", "--port", str(p)], "/"),
    "rpc_app_websockets": lambda p: ([PY, "-m", "rpc_app", "--server", "websockets", "--port", str(p)], "/"),
    "echo_picows": lambda p: ([PY, os.path.join(HERE, "echo_servers.py"), "--stack", "picows", "--port", str(p)], "/"),
    "echo_websockets": lambda p: ([PY, os.path.join(HERE, "echo_servers.py"), "--stack", "websockets",
                                   "--port", str(p)], "/"),
    "ours_channels_daphne": lambda p: ([PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(p),
                                        "channels_apps:application"], "/ours/"),
    "channels_rpc_daphne": lambda p: ([PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(p),
                                       "channels_apps:application"], "/theirs/"),
}


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 20) -> None:
    """Wait until a started server accepts connections on ``port``; RuntimeError if it exits or never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            raise RuntimeError(f"server exited: {err}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


class Server:
    def __init__(self, name):
        self.port = free_port()
        cmd, self.path = TARGETS[name](self.port)
        self.proc = subprocess.Popen(pin(0) + cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     cwd=ROOT)
        try:
            wait_port(self.port, self.proc)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{name}: {exc}") from None

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}{self.path}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def load(loadbin, url, duration, conns, rate=None):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = pin(1) + [loadbin, "--ws", "-t", "1", "-c", str(conns), "-d", f"{duration}s", "--warmup", "1s",
                        "--json", f.name, "--body", ADD]
        cmd += ["-R", str(int(rate))] if rate else ["--max"]
        subprocess.run(cmd + [url], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = json.load(open(f.name))
    lat = d["latency"]["corrected"]["percentiles_us"]
    return d["achieved_rate"], lat["p99"] / 1000, d["errors"]


def bench_rates(args):
    loadbin = args.load or os.environ.get("PERFKIT_LOAD")
    if not loadbin:
        sys.exit("give the perfkit-load binary with --load or PERFKIT_LOAD")
    results = {}
    for name in args.targets.split(","):
        srv = Server(name)
        try:
            top, p99, errs = load(loadbin, srv.url, args.duration, args.connections)
            held = 0
            held_p99 = None
            for frac in (0.1, 0.25, 0.5, 0.7, 0.85, 1.0):
                rate, p99r, e = load(loadbin, srv.url, args.duration, args.connections, rate=top * frac)
                if p99r < 10 and e == 0 and rate >= top * frac * 0.98:
                    held, held_p99 = top * frac, p99r
                else:
                    break
            results[name] = (top, held, held_p99)
            print(f"{name:22s} closed-loop {top:9,.0f} calls/s   held at p99<10ms: {held:9,.0f} calls/s"
                  f" (p99 {held_p99 if held_p99 is not None else float('nan'):.2f} ms)", flush=True)
        finally:
            srv.stop()
    def ratio(a, b, i):
        if a in results and b in results and results[b][i]:
            print(f"{a} / {b}: {results[a][i] / results[b][i]:.2f}x ({'closed-loop' if i == 0 else 'held rate'})")
    ratio("rpc_app_picows", "echo_picows", 0)
    ratio("rpc_app_websockets", "echo_websockets", 0)
    ratio("rpc_app_picows", "channels_rpc_daphne", 1)
    ratio("ours_channels_daphne", "channels_rpc_daphne", 1)
    ratio("echo_picows", "echo_websockets", 0)


async def _large(url, compression, seconds):
    import websockets
    async with websockets.connect(url, compression=compression, max_size=None) as ws:
        n = 0
        nbytes = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            n += 1
            await ws.send('{"jsonrpc":"2.0","method":"big","params":[2048],"id":%d}' % n)
            r = await ws.recv()
            nbytes += len(r)
        return nbytes / (time.perf_counter() - t0) / 1e6, n


def bench_large(args):
    for stack in ("picows", "websockets"):
        srv = Server("rpc_app_" + stack)
        try:
            for comp in ("deflate", None):
                mbs, n = asyncio.run(_large(srv.url, comp, args.duration))
                print(f"2 MB result, {stack:10s} compression={comp or 'off':7s}: {mbs:8.1f} MB/s delivered ({n} calls)",
                      flush=True)
        finally:
            srv.stop()


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _open_idle(port, n):
    conns = []
    req = (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(req)
        await r.readuntil(b"\r\n\r\n")
        conns.append(w)
    return conns


def bench_idle(args):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.idle + 1000)), hard))
    for stack in ("picows", "websockets"):
        srv = Server("rpc_app_" + stack)
        try:
            time.sleep(0.5)
            before = rss_kb(srv.proc.pid if not pin(0) else _child_pid(srv.proc.pid))

            async def go():
                conns = await _open_idle(srv.port, args.idle)
                await asyncio.sleep(1.0)
                after = rss_kb(srv.proc.pid if not pin(0) else _child_pid(srv.proc.pid))
                for w in conns:
                    w.close()
                return after
            after = asyncio.run(go())
            print(f"{args.idle} idle connections, {stack:10s}: server RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB,"
                  f" {(after - before) * 1024 / args.idle / 1024:.1f} KiB per connection", flush=True)
        finally:
            srv.stop()


def _child_pid(pid):
    # taskset execs the command in place: same pid
    return pid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", help="perfkit-load binary")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--idle", type=int, default=0)
    args = ap.parse_args()
    if args.large:
        bench_large(args)
    elif args.idle:
        bench_idle(args)
    else:
        bench_rates(args)


if __name__ == "__main__":
    main()
