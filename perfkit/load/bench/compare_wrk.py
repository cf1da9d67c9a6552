"""Bench: perfkit-load against Debian's wrk, same nginx worker, in the same run.

nginx runs one worker answering from its config (`return 200 "ok"`), pinned to one core; the load
generator under test is pinned to the other core. Measured:

1. closed-loop throughput (wrk vs perfkit-load --max, same threads and connections);
2. CPU time per request of the load generator (user + system time of its process / requests);
3. the highest constant rate perfkit-load holds within 1% with corrected p99 under 5 ms.

Usage (from the repository root):
    bazel run //perfkit/load:bench -- [--duration 5] [--connections 32] [--json out.json]
    python3 perfkit/load/bench/compare_wrk.py --engine path/to/perfkit-load
A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

NGINX_CONF = """
worker_processes 1;
daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    client_body_temp_path {dir};
    proxy_temp_path {dir};
    fastcgi_temp_path {dir};
    uwsgi_temp_path {dir};
    scgi_temp_path {dir};
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "ok"; }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_engine(given: str | None) -> str:
    if given:
        return given
    roots = [os.environ.get("RUNFILES_DIR", ""), os.path.abspath(sys.argv[0]) + ".runfiles"]
    for root in roots:
        if root:
            hits = [h for name in ("perfkit-load", "perfkit-load.bin")
                    for h in glob.glob(os.path.join(root, "*", "perfkit", "load", name))]
            if hits:
                return hits[0]
    found = shutil.which("perfkit-load")
    if found:
        return found
    sys.exit("perfkit-load not found: pass --engine PATH (or run through bazel run //perfkit/load:bench)")


def pinned(cpu: int | None, argv: list[str]) -> list[str]:
    if cpu is None or not shutil.which("taskset"):
        return argv
    return ["taskset", "-c", str(cpu), *argv]


def run_measured(argv: list[str]) -> tuple[str, float, float]:
    """Run to completion; return (stdout, wall seconds, CPU seconds of the process)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} failed ({proc.returncode}): {err.strip()}")
    return out, wall, 0.0


def cpu_of(argv: list[str]) -> tuple[str, float]:
    """Run argv and return (stdout, CPU seconds it used), from the children's rusage."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out, _wall, _ = run_measured(argv)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


def wrk_closed_loop(wrk: str, url: str, cpu: int | None, threads: int, conns: int, secs: float) -> dict:
    out, cpu_s = cpu_of(pinned(cpu, [wrk, f"-t{threads}", f"-c{conns}", f"-d{secs:g}s", url]))
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    return {"rps": rps, "requests": total, "cpu_s": cpu_s, "cpu_us_per_request": 1e6 * cpu_s / max(total, 1)}


def engine_run(engine: str, url: str, cpu: int | None, threads: int, conns: int, secs: float,
               rate: float | None, warmup: float, tmp: str) -> dict:
    out_json = os.path.join(tmp, "result.json")
    argv = [engine, f"-t{threads}", f"-c{conns}", f"-d{secs:g}s", f"--warmup={warmup:g}s", "--json", out_json]
    argv += ["--max"] if rate is None else ["-R", str(rate)]
    argv.append(url)
    _out, cpu_s = cpu_of(pinned(cpu, argv))
    with open(out_json) as f:
        r = json.load(f)
    # CPU time covers the warm-up as well: scale the request count to the whole run.
    total = r["requests"] * (secs + warmup) / secs
    return {
        "rps": r["achieved_rate"],
        "requests": r["requests"],
        "errors": r["errors"],
        "cpu_s": cpu_s,
        "cpu_us_per_request": 1e6 * cpu_s / max(total, 1),
        "p99_corrected_us": r["latency"]["corrected"]["percentiles_us"]["p99"],
        "p99_uncorrected_us": r["latency"]["uncorrected"]["percentiles_us"]["p99"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", help="perfkit-load binary (default: from Bazel runfiles or PATH)")
    ap.add_argument("--wrk", default=shutil.which("wrk"), help="wrk binary (Debian package wrk)")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="closed-loop runs per tool (alternating)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    engine = find_engine(args.engine)
    if not args.wrk:
        sys.exit("wrk not found (apt-get install wrk) or pass --wrk")
    if not os.path.exists(args.nginx):
        sys.exit("nginx not found (apt-get install nginx-light) or pass --nginx")

    tmp = tempfile.mkdtemp(prefix="perfkit-load-bench-")
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=tmp, port=port))
    nginx = subprocess.Popen(pinned(args.server_cpu, [args.nginx, "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("nginx did not start")
        t, c, d = args.threads, args.connections, args.duration
        print(f"nginx (1 worker, return 200) on cpu {args.server_cpu}; load generator on cpu {args.client_cpu}; "
              f"-t{t} -c{c}, {d:g} s per run")
        wrk_runs, eng_runs = [], []
        for i in range(args.repeat):
            wrk_runs.append(wrk_closed_loop(args.wrk, url, args.client_cpu, t, c, d))
            eng_runs.append(engine_run(engine, url, args.client_cpu, t, c, d, None, 0.0, tmp))
            print(f"  run {i + 1}: wrk {wrk_runs[-1]['rps']:.0f} req/s {wrk_runs[-1]['cpu_us_per_request']:.2f} us CPU/req | "
                  f"perfkit-load {eng_runs[-1]['rps']:.0f} req/s {eng_runs[-1]['cpu_us_per_request']:.2f} us CPU/req")
        best = lambda runs, k, f: f(r[k] for r in runs)  # noqa: E731
        wrk_rps, eng_rps = best(wrk_runs, "rps", max), best(eng_runs, "rps", max)
        wrk_cpu, eng_cpu = best(wrk_runs, "cpu_us_per_request", min), best(eng_runs, "cpu_us_per_request", min)
        print(f"closed loop: wrk {wrk_rps:.0f} req/s, perfkit-load {eng_rps:.0f} req/s, ratio {eng_rps / wrk_rps:.3f}")
        print(f"CPU/request: wrk {wrk_cpu:.2f} us, perfkit-load {eng_cpu:.2f} us, ratio {eng_cpu / wrk_cpu:.3f}")

        # Highest constant rate held within 1% with corrected p99 < 5 ms.
        ceiling = max(wrk_rps, eng_rps)
        held, sweep, misses = None, [], 0
        for frac in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95):
            rate = round(ceiling * frac, -2)
            r = engine_run(engine, url, args.client_cpu, t, c, d, rate, 1.0, tmp)
            ok = abs(r["rps"] - rate) / rate <= 0.01 and r["p99_corrected_us"] < 5000 and r["errors"] == 0
            sweep.append({"rate": rate, **r, "held": ok})
            print(f"  -R {rate:.0f}: achieved {r['rps']:.1f}, corrected p99 {r['p99_corrected_us'] / 1000:.2f} ms, "
                  f"uncorrected p99 {r['p99_uncorrected_us'] / 1000:.2f} ms -> {'held' if ok else 'not held'}")
            if ok:
                held, misses = rate, 0
            elif held is not None:
                misses += 1
                if misses == 2:  # two misses in a row above a held rate: past the limit
                    break
        print(f"highest constant rate held (within 1%, corrected p99 < 5 ms): {held} req/s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"wrk": wrk_runs, "perfkit_load": eng_runs, "sweep": sweep,
                           "throughput_ratio": eng_rps / wrk_rps, "cpu_ratio": eng_cpu / wrk_cpu,
                           "highest_held_rate": held, "threads": t, "connections": c, "duration_s": d}, f, indent=2)
    finally:
        nginx.terminate()
        try:
            nginx.wait(5)
        except subprocess.TimeoutExpired:
            nginx.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
