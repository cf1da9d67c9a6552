"""Bench: perfkit-load against wrk, oha and h2load, same nginx worker, in the same run.

nginx runs one worker answering from its config (`return 200 "ok"`, no access log), pinned to one CPU, on three
ports: plain HTTP/1.1, TLS (HTTP/1.1 or h2 by ALPN; a self-signed certificate made with openssl at run time) and
cleartext HTTP/2 (prior knowledge). Every load generator is pinned to the other CPU. Parts (`--parts`):

closed  closed-loop throughput and CPU time per request (user + system time of the generator's process, from
        wait4, / its requests) over http:// and https://: wrk, perfkit-load --max and oha;
h2      HTTP/2 at the same connections x streams: h2load -c C -m S vs perfkit-load --h2 --streams S --max, over
        cleartext (prior knowledge) and TLS (ALPN);
pacing  perfkit-load at constant rates: a sweep for the highest rate it holds (within 1 %, corrected p99 under
        5 ms, no errors), 10,000 and 50,000 req/s (send lateness, achieved rate, corrected and uncorrected p50 and
        p99), and the sub-millisecond check at 20,000 req/s (corrected p50 - uncorrected p50).

Ratios are perfkit-load / peer within this run. A missing wrk, oha or h2load shows as "not installed".

Usage (from the repository root):
    bazel run //perfkit/load:bench -- [--duration 5] [--connections 32] [--parts closed,h2] [--json out.json]
    PYTHONPATH=perfkit python3 perfkit/load/bench/compare_engines.py --engine path/to/perfkit-load
A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from perfkit.procs import free_port

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
    http2_max_concurrent_streams {streams};
    client_body_temp_path {dir};
    proxy_temp_path {dir};
    fastcgi_temp_path {dir};
    uwsgi_temp_path {dir};
    scgi_temp_path {dir};
    server {{
        listen 127.0.0.1:{http_port};
        location / {{ return 200 "ok"; }}
    }}
    server {{
        {h2c_listen}
        location / {{ return 200 "ok"; }}
    }}
{tls_server}}}
"""

TLS_SERVER = """    server {{
        {tls_listen}
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{ return 200 "ok"; }}
    }}
"""

# How to turn HTTP/2 on: nginx 1.25.1 brought the `http2 on;` directive; older ones (Debian 12 has 1.22) take
# `http2` as a parameter of `listen`. The first form `nginx -t` accepts is used.
H2_FORMS = {
    "http2 directive": ("listen {addr} ssl;\n        http2 on;", "listen {addr};\n        http2 on;"),
    "listen parameter": ("listen {addr} ssl http2;", "listen {addr} http2;"),
}

# A self-signed server certificate for 127.0.0.1 and localhost; not a CA (rustls refuses a CA as a server's).
CERT_CONF = """[req]
distinguished_name = dn
x509_extensions = ext
prompt = no
[dn]
CN = localhost
[ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
"""

PARTS = ("closed", "h2", "pacing")
PACING_RATES = (10_000, 50_000)
SUB_MS_RATE = 20_000
SWEEP = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
ENGINE = "perfkit-load"
NOT_INSTALLED = "not installed"


def find_engine(given: str | None) -> str:
    if given:
        return given
    # bazel run starts the script inside its runfiles tree (RUNFILES_DIR is not always set).
    script = os.path.abspath(sys.argv[0])
    roots = [os.environ.get("RUNFILES_DIR", ""), script + ".runfiles"]
    roots += [str(p) for p in pathlib.Path(script).parents if p.name.endswith(".runfiles")]
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


def user_path(path: str | None, bare_name_is_command: bool = True) -> str | None:
    """A path given on the command line, relative to where the user ran `bazel run` (not the runfiles); a bare
    name is a command to look up on PATH unless told otherwise."""
    if not path or os.path.isabs(path) or (bare_name_is_command and os.sep not in path):
        return path
    return os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", ""), path)


def find_tool(given: str | None, name: str) -> str | None:
    """The tool's path, or None when it is not installed (the figures then say so)."""
    path = user_path(given) or shutil.which(name)
    if path and os.sep not in path:
        path = shutil.which(path)
    return path if path and os.access(path, os.X_OK) else None


def tool_version(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    lines = (r.stdout + r.stderr).strip().splitlines()
    return lines[0].strip() if lines else "?"


def pinned(cpu: int | None, argv: list[str]) -> list[str]:
    if cpu is None or not shutil.which("taskset"):
        return argv
    return ["taskset", "-c", str(cpu), *argv]


def run_measured(argv: list[str], timeout: float) -> dict:
    """Run argv to completion: its exit code, stdout, stderr, wall time and CPU time (user + system of the
    process, from wait4; taskset execs the tool, so that is the tool's own process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        if wall >= timeout:
            stderr += f"\ntimed out after {timeout:g} s"
        return {"code": proc.returncode, "out": out.read().decode(errors="replace"), "err": stderr,
                "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


def measured(tool: str, argv: list[str], timeout: float, parse) -> dict:
    """One run of a load generator: the exact command, its figures (from `parse(run)`), or why it failed."""
    fig = {"tool": tool, "command": shlex.join(argv)}
    run = run_measured(argv, timeout)
    fig["cpu_s"] = run["cpu_s"]
    if run["code"] != 0:
        tail = (run["err"] or run["out"]).strip().splitlines()[-3:]
        fig["error"] = f"exit {run['code']}: {' | '.join(tail)}"
        return fig
    try:
        fig.update(parse(run))
    except (AttributeError, KeyError, ValueError, TypeError, OSError) as e:
        tail = (run["err"] or run["out"]).strip().splitlines()[-3:]
        fig["error"] = f"unreadable output ({e!r}): {' | '.join(tail)}"
        return fig
    fig["cpu_us_per_request"] = 1e6 * run["cpu_s"] / max(fig.get("cpu_requests", fig["requests"]), 1)
    fig.pop("cpu_requests", None)
    return fig


def wrk_run(wrk: str, url: str, cpu: int | None, threads: int, conns: int, secs: int) -> dict:
    def parse(run):
        out = run["out"]
        socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        return {"rps": float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1)),
                "requests": int(re.search(r"(\d+) requests in", out).group(1)),
                "errors": sum(map(int, socket_errors.groups())) if socket_errors else 0,
                "non_2xx": int(non2xx.group(1)) if non2xx else 0}

    argv = pinned(cpu, [wrk, f"-t{threads}", f"-c{conns}", f"-d{secs}s", url])
    return measured("wrk", argv, secs + 60, parse)


def oha_json_flags(oha: str) -> list[str]:
    """oha >= 1.9 writes JSON with `--output-format json`; older ones with `-j`."""
    try:
        text = subprocess.run([oha, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    return ["--output-format", "json"] if "--output-format" in text else ["-j"]


def oha_run(oha: str, json_flags: list[str], url: str, cpu: int | None, conns: int, secs: int) -> dict:
    def parse(run):
        r = json.loads(run["out"][run["out"].index("{"):])
        errors = r.get("errorDistribution", {})
        # -z aborts the requests in flight at the end and files them as errors: they are not failures.
        aborted = sum(n for e, n in errors.items() if "deadline" in e)
        return {"rps": r["summary"]["requestsPerSec"],
                "requests": sum(r.get("statusCodeDistribution", {}).values()),
                "errors": sum(errors.values()) - aborted, "aborted_at_deadline": aborted}

    argv = [oha, "-z", f"{secs}s", "-c", str(conns), "--no-tui", *json_flags]
    if url.startswith("https://"):
        argv.append("--insecure")
    return measured("oha", pinned(cpu, [*argv, url]), secs + 60, parse)


def h2load_run(h2load: str, url: str, cpu: int | None, threads: int, conns: int, streams: int,
               secs: int) -> dict:
    def parse(run):
        out = run["out"]
        rps = float(re.search(r"finished in \S+, ([\d.]+) req/s", out).group(1))
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                      r"(\d+) errored, (\d+) timeout", out)
        done, succeeded, failed, errored, timeout = (int(m.group(i)) for i in (3, 4, 5, 6, 7))
        if succeeded == 0:
            raise ValueError("no request succeeded")
        return {"rps": rps, "requests": done, "succeeded": succeeded, "errors": failed + errored + timeout}

    argv = pinned(cpu, [h2load, f"-t{threads}", f"-c{conns}", f"-m{streams}", f"-D{secs}", url])
    return measured("h2load", argv, secs + 60, parse)


def without_hdr(value):
    """A result's object without its encoded histograms (`hdr`), which are large and not needed here."""
    if isinstance(value, dict):
        return {k: without_hdr(v) for k, v in value.items() if k != "hdr"}
    return value


def engine_run(engine: str, url: str, cpu: int | None, threads: int, conns: int, secs: int, tmp: str, *,
               rate: float | None = None, warmup: float = 0.0, h2: bool = False, streams: int = 1,
               cacert: str | None = None) -> dict:
    out_json = os.path.join(tmp, "result.json")
    if os.path.exists(out_json):
        os.unlink(out_json)
    argv = [engine, f"-t{threads}", f"-c{conns}", f"-d{secs}s"]
    if warmup:
        argv.append(f"--warmup={warmup:g}s")
    argv += ["--max"] if rate is None else ["-R", f"{rate:g}"]
    if h2:
        argv += ["--h2", "--streams", str(streams)]
    if cacert:
        argv += ["--cacert", cacert]
    argv += ["--json", out_json, url]

    def parse(_run):
        with open(out_json) as f:
            r = json.load(f)
        lat = r["latency"]
        late = (r.get("send_lateness") or {}).get("percentiles_us") or {}
        eng = r.get("engine") or {}
        return {
            "rps": r["achieved_rate"],
            "requests": r["requests"],
            # The process's CPU time covers the warm-up too: scale the request count to the whole run.
            "cpu_requests": r["requests"] * (secs + warmup) / secs,
            "errors": r["errors"],
            "target_rate": rate,
            "protocol": r.get("protocol"),
            "rate_held": r.get("rate_held"),
            "p50_corrected_us": lat["corrected"]["percentiles_us"]["p50"],
            "p99_corrected_us": lat["corrected"]["percentiles_us"]["p99"],
            "p50_uncorrected_us": lat["uncorrected"]["percentiles_us"]["p50"],
            "p99_uncorrected_us": lat["uncorrected"]["percentiles_us"]["p99"],
            "send_lateness_us": {k: late.get(k) for k in ("p50", "p99", "max")} if late else None,
            "engine": {k: eng.get(k) for k in ("cpu_s", "busiest_thread", "saturated")},
            "connections_opened": without_hdr(r.get("connections_opened")),
        }

    return measured(ENGINE, pinned(cpu, argv), secs + warmup + 60, parse)


# ---------------------------------------------------------------- nginx and the certificate


def make_certificate(openssl: str, tmp: str) -> tuple[str, str]:
    conf, cert, key = (os.path.join(tmp, n) for n in ("cert.cnf", "cert.pem", "key.pem"))
    with open(conf, "w") as f:
        f.write(CERT_CONF)
    argv = [openssl, "req", "-x509", "-config", conf, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", cert, "-days", "2"]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"openssl could not make a certificate: {r.stderr.strip()}")
    return cert, key


def nginx_config(nginx: str, tmp: str, ports: dict, streams: int, cert: tuple[str, str] | None) -> tuple[str, str]:
    """Write nginx.conf in the first HTTP/2 form this nginx accepts; (config path, form)."""
    conf = os.path.join(tmp, "nginx.conf")
    errors = []
    for form, (tls_listen, h2c_listen) in H2_FORMS.items():
        tls_server = ""
        if cert:
            tls_server = TLS_SERVER.format(tls_listen=tls_listen.format(addr=f"127.0.0.1:{ports['https']}"),
                                           cert=cert[0], key=cert[1])
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=tmp, http_port=ports["http"], streams=max(128, streams),
                                      h2c_listen=h2c_listen.format(addr=f"127.0.0.1:{ports['h2c']}"),
                                      tls_server=tls_server))
        r = subprocess.run([nginx, "-t", "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return conf, form
        errors.append(f"{form}: {r.stderr.strip()}")
    sys.exit("nginx accepts neither form of the HTTP/2 configuration:\n" + "\n".join(errors))


def wait_ports(proc: subprocess.Popen, ports: list[int], tmp: str) -> None:
    deadline = time.monotonic() + 10
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    try:
                        with open(os.path.join(tmp, "error.log")) as f:
                            log = f.read().strip()
                    except OSError:
                        log = ""
                    sys.exit(f"nginx did not start (port {port}): {log[-1000:]}")
                time.sleep(0.05)


# ---------------------------------------------------------------- output


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for i, row in enumerate([header, *rows]):
        print("  " + "  ".join(str(c).ljust(w) if j == 0 else str(c).rjust(w)
                               for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def num(x, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def us(x) -> str:
    return "-" if x is None else f"{x:,.0f} us"


def best_of(runs: list[dict] | str) -> dict | str:
    """Highest throughput and lowest CPU per request over a tool's runs; NOT_INSTALLED, or 'failed'."""
    if isinstance(runs, str):
        return runs
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return "failed"
    return {"rps": max(r["rps"] for r in ok), "cpu_us_per_request": min(r["cpu_us_per_request"] for r in ok),
            "runs": len(ok)}


def ratios(best: dict, peers: list[str]) -> dict:
    """perfkit-load / peer for throughput and CPU per request, where both were measured."""
    out = {}
    eng = best.get(ENGINE)
    for peer in peers:
        p = best.get(peer)
        if isinstance(eng, dict) and isinstance(p, dict):
            out[peer] = {"throughput": eng["rps"] / p["rps"] if p["rps"] else None,
                         "cpu_per_request": eng["cpu_us_per_request"] / p["cpu_us_per_request"]
                         if p["cpu_us_per_request"] else None}
        else:
            out[peer] = None
    return out


def cell(best, key: str, fmt: str) -> str:
    return best if isinstance(best, str) else num(best[key], fmt)


def run_line(fig: dict) -> str:
    if "error" in fig:
        return f"{fig['tool']} failed ({fig['error']})"
    return f"{fig['tool']} {fig['rps']:,.0f} req/s {fig['cpu_us_per_request']:.2f} us CPU/req"


def comparison_rows(label: str, best: dict, tools: list[str], peers: list[str], rat: dict) -> list[list[str]]:
    rows = []
    for key, name, fmt, rkey in (("rps", "req/s", ",.0f", "throughput"),
                                 ("cpu_us_per_request", "CPU us/req", ".2f", "cpu_per_request")):
        rows.append([f"{label} {name}", *(cell(best[t], key, fmt) for t in tools),
                     *(num(rat[p][rkey], ".3f") if rat[p] else "-" for p in peers)])
    return rows


# ---------------------------------------------------------------- the parts


def part_closed(args, tools: dict, urls: dict, cacert: str | None, tmp: str) -> dict:
    """wrk, perfkit-load --max and oha, closed loop over http and https, runs alternating."""
    t, c, d = args.threads, args.connections, args.duration
    oha_flags = oha_json_flags(tools["oha"]) if tools["oha"] else []
    names = ["wrk", ENGINE, "oha"]
    peers = ["wrk", "oha"]
    schemes = [s for s in ("http", "https") if urls.get(s)]
    runs = {s: {n: ([] if n == ENGINE or tools[n] else NOT_INSTALLED) for n in names} for s in schemes}
    print(f"\n[closed] closed loop, -t{t} -c{c}, {d} s per run, {args.repeat} run(s) per tool and scheme")
    for i in range(args.repeat):
        for s in schemes:
            url, line = urls[s], []
            if tools["wrk"]:
                runs[s]["wrk"].append(wrk_run(tools["wrk"], url, args.client_cpu, t, c, d))
            runs[s][ENGINE].append(engine_run(tools[ENGINE], url, args.client_cpu, t, c, d, tmp,
                                              cacert=cacert if s == "https" else None))
            if tools["oha"]:
                runs[s]["oha"].append(oha_run(tools["oha"], oha_flags, url, args.client_cpu, c, d))
            for n in names:
                line.append(run_line(runs[s][n][-1]) if isinstance(runs[s][n], list) else f"{n} {NOT_INSTALLED}")
            print(f"  run {i + 1} {s}: " + " | ".join(line))
    result, rows = {}, []
    for s in schemes:
        best = {n: best_of(runs[s][n]) for n in names}
        rat = ratios(best, peers)
        result[s] = {"url": urls[s], "runs": runs[s], "best": best, "ratio_perfkit_load_to": rat}
        rows += comparison_rows(s, best, names, peers, rat)
    for s in ("http", "https"):
        if s not in urls:
            result[s] = {"skipped": urls.get(f"{s}_why", "not measured")}
    table(f"closed loop (-t{t} -c{c}; best of {args.repeat}: highest req/s, lowest CPU/req)",
          ["", *names, "perfkit/wrk", "perfkit/oha"], rows)
    return result


def part_h2(args, tools: dict, urls: dict, cacert: str | None, tmp: str) -> dict:
    """h2load vs perfkit-load --h2 at the same connections x streams, cleartext and TLS."""
    t, c, d, m = args.threads, args.connections, args.duration, args.streams
    names = ["h2load", ENGINE]
    kinds = [(k, u) for k, u in (("h2c", urls["h2c"]), ("h2_tls", urls.get("https"))) if u]
    runs = {k: {ENGINE: [], "h2load": [] if tools["h2load"] else NOT_INSTALLED} for k, _ in kinds}
    print(f"\n[h2] HTTP/2 closed loop, -t{t} -c{c} x {m} streams, {d} s per run")
    for i in range(args.repeat):
        for k, url in kinds:
            if tools["h2load"]:
                runs[k]["h2load"].append(h2load_run(tools["h2load"], url, args.client_cpu, t, c, m, d))
            runs[k][ENGINE].append(engine_run(tools[ENGINE], url, args.client_cpu, t, c, d, tmp, h2=True,
                                              streams=m, cacert=cacert if k == "h2_tls" else None))
            line = [run_line(runs[k][n][-1]) if isinstance(runs[k][n], list) else f"{n} {NOT_INSTALLED}"
                    for n in names]
            print(f"  run {i + 1} {k}: " + " | ".join(line))
    result, rows = {"connections": c, "streams": m}, []
    for k, url in kinds:
        best = {n: best_of(runs[k][n]) for n in names}
        rat = ratios(best, ["h2load"])
        result[k] = {"url": url, "runs": runs[k], "best": best, "ratio_perfkit_load_to": rat}
        rows += comparison_rows(k, best, names, ["h2load"], rat)
    if not urls.get("https"):
        result["h2_tls"] = {"skipped": urls.get("https_why", "not measured")}
    table(f"HTTP/2 (-t{t} -c{c} x {m} streams; h2c = prior knowledge, h2_tls = ALPN; best of {args.repeat})",
          ["", *names, "perfkit/h2load"], rows)
    return result


def part_pacing(args, tools: dict, urls: dict, ceiling: float | None, tmp: str) -> dict:
    """The sweep for the highest rate held, fixed rates, and corrected vs uncorrected p50 at 20,000 req/s."""
    t, c, d = args.threads, args.connections, args.duration
    url = urls["http"]
    engine = tools[ENGINE]
    result: dict = {}
    if ceiling is None:
        probe = engine_run(engine, url, args.client_cpu, t, c, d, tmp)
        result["ceiling_run"] = probe
        ceiling = probe.get("rps")
        if not ceiling:
            print(f"\n[pacing] closed-loop probe failed: {probe.get('error')}")
    print(f"\n[pacing] constant rates, -t{t} -c{c}, {d} s per run after a 1 s warm-up")
    held, sweep, misses = None, [], 0
    for frac in SWEEP if ceiling else ():
        rate = round(ceiling * frac, -2)
        r = engine_run(engine, url, args.client_cpu, t, c, d, tmp, rate=rate, warmup=1.0)
        if "error" in r:
            sweep.append({"rate": rate, **r, "held": False})
            print(f"  -R {rate:.0f}: failed ({r['error']})")
        else:
            ok = abs(r["rps"] - rate) / rate <= 0.01 and r["p99_corrected_us"] < 5000 and r["errors"] == 0
            sweep.append({"rate": rate, **r, "held": ok})
            print(f"  -R {rate:.0f}: achieved {r['rps']:.1f}, corrected p99 {r['p99_corrected_us'] / 1000:.2f} ms, "
                  f"uncorrected p99 {r['p99_uncorrected_us'] / 1000:.2f} ms -> {'held' if ok else 'not held'}")
        if sweep[-1]["held"]:
            held, misses = rate, 0
        elif held is not None:
            misses += 1
            if misses == 2:  # two misses in a row above a held rate: past the limit
                break
    result.update({"ceiling_rps": ceiling, "sweep": sweep, "highest_held_rate": held})

    fixed = []
    for rate in PACING_RATES:
        fixed.append(engine_run(engine, url, args.client_cpu, t, c, d, tmp, rate=rate, warmup=1.0))
    result["rates"] = fixed
    rows = []
    labelled = [(f"{rate:,}", r) for rate, r in zip(PACING_RATES, fixed)]
    labelled += [(f"{s['rate']:,.0f} (highest held)", s) for s in sweep if held is not None and s["rate"] == held]
    for label, r in labelled:
        if "error" in r:
            rows.append([label, "failed", *["-"] * 6])
            continue
        late = r["send_lateness_us"] or {}
        rows.append([label, num(r["rps"], ",.1f"), {True: "yes", False: "no"}.get(r["rate_held"], "-"),
                     us(late.get("p99")), us(r["p50_corrected_us"]), us(r["p99_corrected_us"]),
                     us(r["p50_uncorrected_us"]), us(r["p99_uncorrected_us"])])
    table(f"pacing (-t{t} -c{c}; sweep: highest rate held within 1 % with corrected p99 < 5 ms and no errors: "
          f"{num(held)} req/s)",
          ["-R req/s", "achieved", "rate_held", "lateness p99", "corr p50", "corr p99", "uncorr p50", "uncorr p99"],
          rows)

    r = engine_run(engine, url, args.client_cpu, t, c, d, tmp, rate=SUB_MS_RATE, warmup=1.0)
    sub = {"rate": SUB_MS_RATE, "run": r}
    if "error" not in r:
        sub["corrected_minus_uncorrected_p50_us"] = r["p50_corrected_us"] - r["p50_uncorrected_us"]
        sub["under_100_us"] = sub["corrected_minus_uncorrected_p50_us"] < 100
        row = [f"{SUB_MS_RATE:,}", num(r["rps"], ",.1f"), us(r["p50_corrected_us"]), us(r["p50_uncorrected_us"]),
               us(sub["corrected_minus_uncorrected_p50_us"]), "yes" if sub["under_100_us"] else "no"]
    else:
        row = [f"{SUB_MS_RATE:,}", "failed", "-", "-", "-", "-"]
    result["sub_millisecond"] = sub
    table("sub-millisecond check (corrected p50 - uncorrected p50: the schedule's own share of the median)",
          ["-R req/s", "achieved", "corr p50", "uncorr p50", "difference", "under 100 us"], [row])
    return result


# ---------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", help="perfkit-load binary (default: from Bazel runfiles or PATH)")
    ap.add_argument("--wrk", help="wrk binary (default: wrk on PATH; Debian package wrk)")
    ap.add_argument("--oha", help="oha binary (default: oha on PATH; cargo install oha --locked)")
    ap.add_argument("--h2load", help="h2load binary (default: h2load on PATH; Debian package nghttp2-client)")
    ap.add_argument("--nginx", help="nginx binary (default: nginx on PATH or /usr/sbin/nginx)")
    ap.add_argument("--duration", type=int, default=5, help="whole seconds per run (default 5)")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--streams", type=int, default=10, help="HTTP/2 streams per connection (default 10)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="runs per tool in the closed and h2 parts (alternating)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (default all)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or any(p not in PARTS for p in parts):
        ap.error(f"--parts takes a comma-separated list of {', '.join(PARTS)}")
    if args.duration < 1 or args.connections < args.threads or args.threads < 1 or args.streams < 1 \
            or args.repeat < 1:
        ap.error("need --duration >= 1, --threads >= 1, --connections >= --threads, --streams >= 1, --repeat >= 1")
    tools = {
        ENGINE: find_engine(user_path(args.engine)),
        "wrk": find_tool(args.wrk, "wrk"),
        "oha": find_tool(args.oha, "oha"),
        "h2load": find_tool(args.h2load, "h2load"),
        "nginx": find_tool(args.nginx, "nginx") or (None if args.nginx else find_tool(None, "/usr/sbin/nginx")),
        "openssl": find_tool(None, "openssl"),
    }
    if not tools["nginx"]:
        sys.exit("nginx not found (apt-get install nginx-light) or pass --nginx")
    versions = {"wrk": ["-v"], ENGINE: ["--version"], "oha": ["--version"], "h2load": ["--version"],
                "nginx": ["-v"], "openssl": ["version"]}
    tool_info = {n: ({"path": p, "version": tool_version([p, *versions[n]])} if p else NOT_INSTALLED)
                 for n, p in tools.items()}

    tmp = tempfile.mkdtemp(prefix="perfkit-load-bench-")
    ports: dict[str, int] = {}
    while len(set(ports.values())) < 3:
        ports = {"http": free_port(), "https": free_port(), "h2c": free_port()}
    cert = make_certificate(tools["openssl"], tmp) if tools["openssl"] else None
    conf, h2_form = nginx_config(tools["nginx"], tmp, ports, args.streams, cert)
    with open(conf) as f:
        nginx_conf_text = f.read()
    nginx_argv = pinned(args.server_cpu, [tools["nginx"], "-p", tmp, "-e", os.path.join(tmp, "error.log"),
                                          "-c", conf])
    nginx = subprocess.Popen(nginx_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    urls = {"http": f"http://127.0.0.1:{ports['http']}/", "h2c": f"http://127.0.0.1:{ports['h2c']}/"}
    if cert:
        urls["https"] = f"https://127.0.0.1:{ports['https']}/"
    else:
        urls["https_why"] = "openssl not installed: no certificate, no TLS port"
    cacert = cert[0] if cert else None
    figures: dict = {}
    try:
        wait_ports(nginx, [ports["http"], ports["h2c"]] + ([ports["https"]] if cert else []), tmp)
        load_before = os.getloadavg()
        print(f"nginx ({tool_info['nginx']['version']}, 1 worker, return 200, HTTP/2 by {h2_form}) on cpu "
              f"{args.server_cpu}; load generators on cpu {args.client_cpu}; -t{args.threads} -c{args.connections}, "
              f"{args.duration} s per run; load average {load_before[0]:.2f}")
        for name in ("wrk", "oha", "h2load"):
            if not tools[name]:
                given = getattr(args, name)
                print(f"  {name}: {NOT_INSTALLED}" + (f" ({given} is not an executable)" if given else ""))
        if not cert:
            print(f"  {urls['https_why']}")
        figures["setup"] = {
            "threads": args.threads, "connections": args.connections, "streams": args.streams,
            "duration_s": args.duration, "repeat": args.repeat, "server_cpu": args.server_cpu,
            "client_cpu": args.client_cpu, "parts": parts, "tools": tool_info,
            "nginx": {"command": shlex.join(nginx_argv), "http2_form": h2_form, "urls": urls,
                      "config": nginx_conf_text},
            "started_unix_s": time.time(), "load_average_before": load_before,
        }
        ceiling = None
        if "closed" in parts:
            figures["closed_loop"] = part_closed(args, tools, urls, cacert, tmp)
            http_best = [b["rps"] for b in figures["closed_loop"]["http"]["best"].values() if isinstance(b, dict)]
            ceiling = max(http_best) if http_best else None
        if "h2" in parts:
            figures["h2"] = part_h2(args, tools, urls, cacert, tmp)
        if "pacing" in parts:
            figures["pacing"] = part_pacing(args, tools, urls, ceiling, tmp)
        figures["setup"]["load_average_after"] = os.getloadavg()
        print(f"\nload average after: {figures['setup']['load_average_after'][0]:.2f}")
        if args.json:
            path = user_path(args.json, bare_name_is_command=False)
            with open(path, "w") as f:
                json.dump(figures, f, indent=2)
            print(f"figures written to {path}")
    finally:
        nginx.terminate()
        try:
            nginx.wait(5)
        except subprocess.TimeoutExpired:
            nginx.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
