#!/usr/bin/env python3
"""Throughput of aurora_app vs nginx (one worker each, answering from memory).

    python3 bench/bench.py --aurora path/to/aurora_app [--duration 10] [--connections 50]

Each server runs with one worker pinned to --server-cpu; wrk (one thread) is
pinned to --load-cpu. nginx answers /plaintext and /json with `return 200 "..."`
from its config (its faster setup) with access logging off. Runs alternate
between servers (--rounds) and the best round of each is reported, as
req/s and as a ratio to nginx in the same run. Benchmarks are not tests: the
absolute figures depend on the machine and whatever else is running on it.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log error;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /plaintext {{ default_type text/plain; return 200 "Hello, World!"; }}
        location = /json {{ default_type application/json; return 200 '{{"message":"Hello, World!"}}'; }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


def start_aurora(binary, cpu):
    p = subprocess.Popen(["taskset", "-c", str(cpu), binary, "--port", "0", "--workers", "1"],
                         stdout=subprocess.PIPE, text=True)
    m = re.search(r":(\d+)", p.stdout.readline())
    return p, int(m.group(1))


def start_nginx(nginx, cpu, tmp):
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port))
    p = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-p", tmp, "-c", conf],
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, port


def wrk(cpu, port, path, duration, conns):
    out = subprocess.run(["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conns}", f"-d{duration}s",
                          "--latency", f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+\w+)", out).group(1)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    return {"rps": rps, "p99": p99, "errors": errors.group(0) if errors else ""}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aurora", required=True, help="aurora_app binary")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for name in ("nginx", "aurora"):
                if name == "nginx":
                    proc, port = start_nginx(args.nginx, args.server_cpu, tmp)
                else:
                    proc, port = start_aurora(args.aurora, args.server_cpu)
                try:
                    for path in ("/plaintext", "/json"):
                        wrk(args.load_cpu, port, path, 2, args.connections)  # warm-up
                        r = wrk(args.load_cpu, port, path, args.duration, args.connections)
                        key = f"{name} {path}"
                        print(f"round {rnd + 1}: {key:18s} {r['rps']:>10.0f} req/s  p99 {r['p99']} {r['errors']}",
                              flush=True)
                        if key not in results or r["rps"] > results[key]["rps"]:
                            results[key] = r
                finally:
                    proc.send_signal(signal.SIGTERM if name == "aurora" else signal.SIGQUIT)
                    proc.wait(20)
    print()
    print(f"best of {args.rounds} rounds, wrk -t1 -c{args.connections} -d{args.duration}s, "
          f"server on CPU {args.server_cpu}, wrk on CPU {args.load_cpu}")
    print("| endpoint | nginx req/s | aurora req/s | aurora / nginx |")
    print("|---|---:|---:|---:|")
    for path in ("/plaintext", "/json"):
        n, a = results[f"nginx {path}"]["rps"], results[f"aurora {path}"]["rps"]
        print(f"| {path} | {n:.0f} | {a:.0f} | {a / n:.2f} |")
    a_json, a_plain = results["aurora /json"]["rps"], results["aurora /plaintext"]["rps"]
    print(f"aurora /json vs /plaintext: {a_json / a_plain:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
