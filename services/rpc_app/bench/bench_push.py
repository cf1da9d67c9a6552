"""Push fan-out bench: one publisher, N subscribers, rpc_app's groups against plain websockets.

    python bench/bench_push.py [--subscribers 1000] [--rates 20,50,100,200] [--duration 5]

Targets (each server pinned to CPU 0, the clients to CPU 1):
  rpc_app_picows / rpc_app_websockets  subscribers call subscribe("bench"); the publisher calls
                                       publish("bench", {"t": <send time>}) at a fixed rate
  fanout_websockets                    plain websockets: every message from the publisher goes out with
                                       websockets' broadcast() to every other connection (no JSON-RPC)
Subscribers are picows clients in one process; a message's delivery latency is its arrival time minus the
send time it carries (CLOCK_MONOTONIC, shared by the processes of one machine). Reported per target and
publish rate: messages delivered per second and p50/p99 delivery latency; a rate is held when every
subscriber got every message and the p99 delivery latency stays under --slo-ms.
"""

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time

from bench_ws import HERE, PY, ROOT, env, free_port, pin, wait_port

T_FIELD = re.compile(rb'"t":([0-9.e+-]+)')

TARGETS = {
    "rpc_app_picows": lambda p: [PY, "-m", "rpc_app", "--server", "picows", "--port", str(p)],
    "rpc_app_websockets": lambda p: [PY, "-m", "rpc_app", "--server", "websockets", "--port", str(p)],
    "fanout_websockets": lambda p: [PY, os.path.join(HERE, "echo_servers.py"), "--stack", "fanout-websockets",
                                    "--port", str(p)],
}


def client_main(args) -> None:
    """Runs in the client process: open the subscribers, publish at each rate, print one JSON line per rate."""
    import uvloop
    uvloop.run(_clients(args))


async def _clients(args) -> None:
    from picows import WSListener, WSMsgType, ws_connect

    rpc = args.target.startswith("rpc_app")
    arrivals: list[float] = []

    class Subscriber(WSListener):
        def on_ws_frame(self, transport, frame):
            if frame.msg_type is WSMsgType.TEXT:
                m = T_FIELD.search(frame.get_payload_as_bytes())
                if m:
                    arrivals.append(time.monotonic() - float(m.group(1)))

    url = f"ws://127.0.0.1:{args.port}/"
    subs = []
    for i in range(args.subscribers):
        transport, _ = await ws_connect(Subscriber, url + ("" if rpc else "sub"))
        if rpc:
            transport.send(WSMsgType.TEXT, b'{"jsonrpc":"2.0","method":"subscribe","params":["bench"],"id":1}')
        subs.append(transport)
    publisher, _ = await ws_connect(WSListener, url + ("" if rpc else "pub"))
    await asyncio.sleep(1.0)  # subscriptions settle (their answers carry no "t")
    for rate in args.rates:
        arrivals.clear()
        sent = 0
        start = time.monotonic()
        while (now := time.monotonic()) - start < args.duration:
            due = start + sent / rate
            if now < due:
                await asyncio.sleep(due - now)
            body = json.dumps({"t": time.monotonic()}, separators=(",", ":"))
            msg = (f'{{"jsonrpc":"2.0","method":"publish","params":["bench",{body}]}}' if rpc else body)
            publisher.send(WSMsgType.TEXT, msg.encode())
            sent += 1
        await asyncio.sleep(2.0)  # stragglers
        lat = sorted(arrivals)
        expected = sent * args.subscribers
        pct = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3 if lat else float("nan"))
        print(json.dumps({"target": args.target, "rate": rate, "published": sent, "delivered": len(lat),
                          "expected": expected, "delivered_per_s": round(len(lat) / args.duration),
                          "p50_ms": round(pct(0.50), 2), "p99_ms": round(pct(0.99), 2),
                          "all_delivered": len(lat) == expected}), flush=True)
    for t in subs + [publisher]:
        t.disconnect()


def run_target(name: str, args) -> list[dict]:
    port = free_port()
    server = subprocess.Popen(pin(0) + TARGETS[name](port), env=env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, cwd=ROOT)
    try:
        wait_port(port, server)
        cmd = pin(1) + [PY, __file__, "--client", "--target", name, "--port", str(port),
                        "--subscribers", str(args.subscribers), "--duration", str(args.duration),
                        "--rates", ",".join(map(str, args.rates))]
        out = subprocess.run(cmd, env=env(), capture_output=True, text=True, cwd=ROOT,
                             timeout=60 + len(args.rates) * (args.duration + 5))
        if out.returncode != 0:
            raise RuntimeError(f"{name}: client failed: {out.stderr[-2000:]}")
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        for r in rows:
            r["held"] = r["all_delivered"] and r["p99_ms"] < args.slo_ms
        return rows
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[20, 50, 100, 150, 200],
                    help="publish rates (messages/s), comma-separated")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per rate")
    ap.add_argument("--slo-ms", type=float, default=50.0, help="p99 delivery latency a held rate stays under")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client_main(args)
    rows = []
    for name in args.targets.split(","):
        rows += run_target(name, args)
        for r in rows[-len(args.rates):]:
            print(f"{r['target']:20} {r['rate']:5}/s  delivered {r['delivered_per_s']:>8}/s "
                  f"p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms  {'held' if r['held'] else 'NOT held'}",
                  flush=True)
    best = {}
    for r in rows:
        if r["held"]:
            best[r["target"]] = max(best.get(r["target"], 0), r["delivered_per_s"])
    print(json.dumps({"max_delivered_per_s_held": best}))


if __name__ == "__main__":
    sys.exit(main())
