"""Batch bench: JSON-RPC batches of N `add` calls, closed loop, against the raw echo floor of each stack.

    python bench/bench_batch.py [--batch 10] [--connections 16] [--duration 5]

Each connection keeps one batch in flight (send, wait for the answer, send the next). The echo servers
return the batch text unchanged: the floor, what the stack costs for a message of that size with no
JSON-RPC work. Reported: calls/s (batches/s x N) and the ratio to the floor of the same stack. Server
pinned to CPU 0, the client (picows, one process) to CPU 1.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

from bench_ws import HERE, PY, ROOT, env, free_port, pin, wait_port

TARGETS = {
    "rpc_app_picows": lambda p: [PY, "-m", "rpc_app", "--server", "picows", "--port", str(p)],
    "echo_picows": lambda p: [PY, os.path.join(HERE, "echo_servers.py"), "--stack", "picows", "--port", str(p)],
    "rpc_app_websockets": lambda p: [PY, "-m", "rpc_app", "--server", "websockets", "--port", str(p)],
    "echo_websockets": lambda p: [PY, os.path.join(HERE, "echo_servers.py"), "--stack", "websockets",
                                  "--port", str(p)],
}
FLOOR = {"rpc_app_picows": "echo_picows", "rpc_app_websockets": "echo_websockets"}


def batch_text(n: int) -> bytes:
    """A batch of n `add` calls; n = 0: one plain call (no batch), the reference for what batching saves."""
    if n == 0:
        return b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
    return json.dumps([{"jsonrpc": "2.0", "method": "add", "params": [i, 1], "id": i} for i in range(n)],
                      separators=(",", ":")).encode()


async def _client(port: int, connections: int, duration: float, n: int) -> dict:
    from picows import WSListener, WSMsgType, ws_connect

    payload = batch_text(n)
    done = [0]
    bad = [0]
    stop_at = [float("inf")]

    class Conn(WSListener):
        def on_ws_connected(self, transport):
            self.transport = transport

        def on_ws_frame(self, transport, frame):
            if frame.msg_type is not WSMsgType.TEXT:
                return
            answer = frame.get_payload_as_bytes()
            if answer.count(b'"id"') != max(n, 1) or (n and not answer.startswith(b"[")):
                bad[0] += 1
            done[0] += 1
            if time.monotonic() < stop_at[0]:
                transport.send(WSMsgType.TEXT, payload)

    conns = [(await ws_connect(Conn, f"ws://127.0.0.1:{port}/"))[0] for _ in range(connections)]
    stop_at[0] = time.monotonic() + 1.0  # warm-up second
    for t in conns:
        t.send(WSMsgType.TEXT, payload)
    await asyncio.sleep(1.2)
    done[0] = 0
    start = time.monotonic()
    stop_at[0] = start + duration
    for t in conns:
        t.send(WSMsgType.TEXT, payload)
    await asyncio.sleep(duration + 0.5)
    for t in conns:
        t.disconnect()
    return {"batches_per_s": done[0] / duration, "calls_per_s": done[0] * max(n, 1) / duration,
            "bad_answers": bad[0]}


def client_main(args) -> None:
    import uvloop
    print(json.dumps(uvloop.run(_client(args.port, args.connections, args.duration, args.batch))))


def measure(name: str, args) -> dict:
    port = free_port()
    server = subprocess.Popen(pin(0) + TARGETS[name](port), env=env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, cwd=ROOT)
    try:
        wait_port(port, server)
        cmd = pin(1) + [PY, __file__, "--client", "--port", str(port), "--batch", str(args.batch),
                        "--connections", str(args.connections), "--duration", str(args.duration)]
        out = subprocess.run(cmd, env=env(), capture_output=True, text=True, cwd=ROOT, timeout=args.duration + 60)
        if out.returncode != 0:
            raise RuntimeError(f"{name}: client failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=10, help="calls per batch; 0 = single calls, no batch")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client_main(args)
    results = {}
    for name in args.targets.split(","):
        results[name] = r = measure(name, args)
        print(f"{name:20} {r['calls_per_s']:>10,.0f} calls/s ({r['batches_per_s']:,.0f} batches of {args.batch}/s)"
              f"{'  BAD ANSWERS: %d' % r['bad_answers'] if r['bad_answers'] else ''}", flush=True)
    for ours, floor in FLOOR.items():
        if ours in results and floor in results:
            print(f"{ours} / {floor}: {results[ours]['calls_per_s'] / results[floor]['calls_per_s']:.2f}x")
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
