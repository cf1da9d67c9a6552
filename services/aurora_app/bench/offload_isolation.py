"""Does blocking work handed to the offload pool leave the worker's other requests alone?

    python3 bench/offload_isolation.py --aurora ./aurora_app --perfkit-load path/to/perfkit-load
        [--rate 5000] [--offload-rate 4000] [--duration 10] [--rounds 3] [--offload-threads 16]

aurora_app runs with one worker on --server-cpu. Each round measures /plaintext at a constant --rate
(16 connections) twice, in alternating order: alone, and while a second perfkit-load drives
/offload?ms=1 (1 ms of blocking work per request on the offload pool) at --offload-rate over 32
connections. Both load engines share --load-cpu. It prints the corrected latency of /plaintext
(from each request's intended send time) per round and the medians, and what /offload achieved.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile


def start_aurora(binary, cpu, offload_threads):
    p = subprocess.Popen(["taskset", "-c", str(cpu), binary, "--port", "0", "--workers", "1",
                          "--offload-threads", str(offload_threads)], stdout=subprocess.PIPE, text=True)
    m = re.search(r":(\d+) ", p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit("aurora_app did not start")
    return p, int(m.group(1))


def load_cmd(load_bin, cpu, port, path, rate, duration, conns, out):
    return ["taskset", "-c", str(cpu), load_bin, "-t1", f"-c{conns}", f"-d{duration}s", "--warmup", "1s",
            "-R", str(int(rate)), "--json", out, f"http://127.0.0.1:{port}{path}"]


def summary(path):
    with open(path) as f:
        r = json.load(f)
    c = r["latency"]["corrected"]["percentiles_us"]
    return {"achieved": r["achieved_rate"], "errors": r["errors"], "p50_us": c["p50"], "p99_us": c["p99"],
            "p99_9_us": c["p99_9"]}


def plaintext_run(args, port, tmp, with_offload):
    out, off_out = os.path.join(tmp, "plain.json"), os.path.join(tmp, "offload.json")
    background = None
    if with_offload:  # starts first and ends last: it covers the whole /plaintext window
        background = subprocess.Popen(load_cmd(args.perfkit_load, args.load_cpu, port, "/offload?ms=1",
                                               args.offload_rate, args.duration + 2, 32, off_out),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(load_cmd(args.perfkit_load, args.load_cpu, port, "/plaintext", args.rate, args.duration, 16,
                            out), capture_output=True, check=True)
    res = summary(out)
    if background is not None:
        background.wait()
        res["offload"] = summary(off_out)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aurora", required=True)
    ap.add_argument("--perfkit-load", required=True)
    ap.add_argument("--rate", type=float, default=5000, help="/plaintext req/s")
    ap.add_argument("--offload-rate", type=float, default=4000, help="/offload?ms=1 req/s")
    ap.add_argument("--offload-threads", type=int, default=16)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    args = ap.parse_args()
    proc, port = start_aurora(args.aurora, args.server_cpu, args.offload_threads)
    runs = {"alone": [], "with offload": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rnd in range(args.rounds):
                order = [False, True] if rnd % 2 == 0 else [True, False]
                for with_offload in order:
                    key = "with offload" if with_offload else "alone"
                    r = plaintext_run(args, port, tmp, with_offload)
                    runs[key].append(r)
                    extra = ""
                    if "offload" in r:
                        o = r["offload"]
                        extra = f"  (/offload: {o['achieved']:.0f} req/s, p99 {o['p99_us']} us, errors {o['errors']})"
                    print(f"round {rnd + 1}: /plaintext {key:12s} {r['achieved']:.0f} req/s  p50 {r['p50_us']} us"
                          f"  p99 {r['p99_us']} us  p99.9 {r['p99_9_us']} us  errors {r['errors']}{extra}",
                          flush=True)
    finally:
        proc.terminate()
        proc.wait(15)
    print(f"\n/plaintext at {args.rate:.0f} req/s on one worker, medians of {args.rounds} rounds "
          f"(corrected latency, µs):")
    print("| /plaintext | p50 | p99 | p99.9 |")
    print("|---|---:|---:|---:|")
    for key, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("p50_us", "p99_us", "p99_9_us")}
        print(f"| {key} | {med['p50_us']:.0f} | {med['p99_us']:.0f} | {med['p99_9_us']:.0f} |")
    off = [r["offload"]["achieved"] for r in runs["with offload"]]
    print(f"/offload?ms=1 meanwhile: median {statistics.median(off):.0f} req/s of {args.offload_rate:.0f} offered")


if __name__ == "__main__":
    main()
