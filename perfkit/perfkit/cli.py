"""The command line.

    perfkit [--suite quick|full] [--only NAME ...] [--duration S] [--repeat N] [--out DIR] [--list] ...
    perfkit compare A/results.json B/results.json [--min-change 0.05] [--force] [--all] [--fail-on-slower] [--json OUT]
    perfkit gate BASELINE.toml [--rounds N] [--scenarios DIR] [--bin NAME=PATH]
    perfkit trend SCENARIO [--workload W] [--index results/index.jsonl] [--out FILE.html]
    perfkit report RESULTS_DIR            # re-render report.md / report.html from a results.json
    perfkit paired SCENARIO/BASE SCENARIO/VARIANT [--workload W] [--rounds N] [--max-cost 0.05]
    perfkit merge A.json B.json ... [--json OUT] [--threshold EXPR]... [-L]
    perfkit distributed --scheduler tcp://HOST:8786 [--workers A,B] [--json OUT] [--threshold EXPR]... -- ENGINE_ARGS

Exit status: 0 done, 1 some system failed / a regression with --fail-on-slower / a paired cost not shown
within --max-cost / a gate failed / a load segment failed, 2 bad input (compare: runs measured differently),
3 a load threshold failed (merge, distributed), 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

from . import compare as compare_mod
from . import gate as gate_mod
from . import history, procs, promsd, report_html, report_md, results
from . import paired as paired_mod
from .clients import ClientRun
from .loadgen import engine_version
from .paired import PairedRun, PairedSettings
from .progress import Progress
from .runner import ServerRun, Settings, resolve_bins
from .scenarios import Registry, ScenarioError

SUITES = {
    # duration = each constant-rate run, probe = each closed-loop probe
    # search_steps = bisection steps of the sustainable-throughput search (after the shared rates bound it)
    "quick": {"duration": 2.0, "probe": 2.0, "warmup": 1.0, "repeat": 2, "search_steps": 4},
    "full": {"duration": 10.0, "probe": 5.0, "warmup": 3.0, "repeat": 3, "search_steps": 6},
}


def _positive(text: str) -> float:
    try:
        v = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < v <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 3600] seconds")
    return v


def _int_in(option: str, lo: int, hi: int, *, even: bool = False):
    """An argparse type: an integer in [lo, hi] (and even, when asked), else a message naming ``option``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi or (even and v % 2):
            kind = "an even number (blocks of two rounds) from" if even else "between"
            raise argparse.ArgumentTypeError(f"{option} must be {kind} {lo} {'to' if even else 'and'} {hi}")
        return v
    return parse


_repeat = _int_in("--repeat", 1, 100)
_rounds = _int_in("--rounds", 2, 10000, even=True)


def _bin(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--bin {text!r}: use NAME=PATH")
    k, v = text.split("=", 1)
    return k.strip(), v.strip()


def metrics_addr_error(addr: str) -> str | None:
    """Why ``--metrics-addr`` cannot be served, or None. Checked before anything starts: every load run binds it
    in turn, so a taken port or a typo would otherwise fail every system one by one."""
    host, sep, port = addr.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"--metrics-addr {addr!r}: use HOST:PORT, e.g. 127.0.0.1:9464"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return f"--metrics-addr {addr!r}: {host!r} is not an IP address (the load engine needs one)"
    fam = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, int(port)))
        except OSError as e:
            return f"--metrics-addr {addr}: cannot listen there: {e.strerror or e}"
    return None


def _user_path(p: str) -> str:
    """Relative paths are relative to where the user ran the command (also under `bazel run`)."""
    base = os.environ.get("BUILD_WORKING_DIRECTORY") or os.getcwd()
    return os.path.normpath(os.path.join(base, os.path.expanduser(p)))


def bench_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfkit", description="Run the perfkit bench: every registered service "
                                "against its peers and floor; writes results.json, report.md and report.html.",
                                epilog="Other commands: 'perfkit compare A B', 'perfkit report DIR', "
                                "'perfkit paired A B', 'perfkit gate BASELINE.toml', 'perfkit trend SCENARIO', "
                                "'perfkit merge A.json B.json', "
                                "'perfkit distributed --scheduler ADDR -- ENGINE_ARGS'.")
    p.add_argument("--suite", choices=sorted(SUITES), default="quick", help="quick (default, <= 10 min) or full")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="a scenario, SCENARIO/SYSTEM or a system name (repeatable; default: everything)")
    p.add_argument("--duration", type=_positive, help="seconds per constant-rate run (and per client run)")
    p.add_argument("--probe", type=_positive, help="seconds per closed-loop saturation probe")
    p.add_argument("--warmup", type=float, help="seconds of warm-up before the first probe")
    p.add_argument("--repeat", type=_repeat, help="repeats per figure (medians and spreads are reported)")
    p.add_argument("--search-steps", type=_int_in("--search-steps", 0, 20),
                   help="bisection steps of the sustainable-throughput search (quick 4, full 6)")
    p.add_argument("--out", help="output folder (default: results/<timestamp> in the workspace)")
    p.add_argument("--list", action="store_true", help="list the registered scenarios and exit")
    p.add_argument("--scenarios", help="scenario folder (default: perfkit/scenarios)")
    p.add_argument("--bin", action="append", type=_bin, default=[], metavar="NAME=PATH",
                   help="where a binary named in the scenarios (${bin:NAME}) or perfkit-load is")
    p.add_argument("--metrics-addr", metavar="HOST:PORT",
                   help="serve the load engine's live Prometheus metrics there during every run")
    p.add_argument("--prom-sd-dir", metavar="DIR",
                   help="write Prometheus target files there (file_sd): one per running system with a metrics URL "
                        "and one per load run (which then serves its metrics, on --metrics-addr or a free port), "
                        f"labels job and service; default ${promsd.ENV}; unset: none "
                        "(dashboards/prometheus/prometheus.yml reads dashboards/prometheus/sd)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    return p


def sd_dir_error(path: str) -> str | None:
    """Why target files cannot be written to ``path`` (created if missing), or None."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, suffix=".tmp"):
            pass
    except OSError as e:
        return f"--prom-sd-dir {path}: cannot write there: {e.strerror or e}"
    return None


def list_scenarios(reg: Registry) -> str:
    lines = []
    for name in reg.names():
        sc = reg.get(name)
        lines.append(f"{name} ({sc.kind}): {sc.description}")
        if sc.kind == "client":
            lines.append(f"  server: {sc.server.name}")
        for m in sc.members():
            only = getattr(m, "suites", None)
            note = f" (suites: {', '.join(only)})" if only and len(only) < len(SUITES) else ""
            served = getattr(m, "workloads", None)
            note += f" (workloads: {', '.join(served)})" if served else ""
            lines.append(f"  {m.role:<8} {m.name}{note}")
        for w in sc.workloads:
            lines.append(f"  workload {w.name}: {w.method} {w.path} ({w.mode}, suites: {', '.join(w.suites)})")
    return "\n".join(lines) + "\n"


def _default_out(prefix: str = "") -> str:
    base = os.environ.get("BUILD_WORKSPACE_DIRECTORY") or os.getcwd()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return os.path.join(base, "results", prefix + stamp)


PEERS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peers")


def _load_engine(bins) -> tuple[str | None, str | None]:
    """(path, None) of the perfkit-load binary, or (None, why it cannot be used)."""
    try:
        path = bins["perfkit-load"]
    except KeyError:
        return None, ("the load engine perfkit-load was not found: pass --bin perfkit-load=PATH or set "
                      "PERFKIT_BIN_PERFKIT_LOAD (build it with `tools/bazel build //perfkit/load:perfkit-load`)")
    if not os.access(path, os.X_OK):
        return None, f"the load engine {path} is not an executable file"
    return path, None


def _output_folder(out: str) -> str | None:
    """Create ``out`` and its logs/ folder; why not, or None."""
    try:
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    except OSError as e:
        return f"cannot create the output folder {out}: {e.strerror or e}"
    return None


def write_reports(doc: dict, out: str) -> list[str]:
    paths = [results.write(doc, out)]
    for name, render in (("report.md", report_md.render), ("report.html", report_html.render)):
        path = os.path.join(out, name)
        with open(path, "w") as f:
            f.write(render(doc))
        paths.append(path)
    return paths


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def run_bench(argv: list[str]) -> int:
    a = bench_parser().parse_args(argv)
    try:
        reg = Registry.load(_user_path(a.scenarios) if a.scenarios else None)
        if a.list:
            sys.stdout.write(list_scenarios(reg))
            return 0
        selection = reg.select(a.only)
    except ScenarioError as e:
        print(f"perfkit: error: {e}", file=sys.stderr)
        return 2
    if a.metrics_addr and (err := metrics_addr_error(a.metrics_addr)):
        print(f"perfkit: error: {err}", file=sys.stderr)
        return 2
    sd_dir = promsd.directory(a.prom_sd_dir)
    sd_dir = _user_path(sd_dir) if sd_dir else None
    if sd_dir and (err := sd_dir_error(sd_dir)):
        print(f"perfkit: error: {err}", file=sys.stderr)
        return 2
    preset = SUITES[a.suite]
    bins = resolve_bins(dict(a.bin))
    load_bin, err = _load_engine(bins)
    sut, load = procs.cpu_sets()
    out = _user_path(a.out) if a.out else _default_out()
    err = err or _output_folder(out)
    if err:
        print(f"perfkit: error: {err}", file=sys.stderr)
        return 2
    work = os.path.join(out, "logs")
    settings = Settings(
        suite=a.suite, duration=a.duration or preset["duration"], probe=a.probe or preset["probe"],
        warmup=preset["warmup"] if a.warmup is None else max(0.0, a.warmup),
        repeat=a.repeat or preset["repeat"],
        search_steps=preset["search_steps"] if a.search_steps is None else a.search_steps, load_bin=load_bin, bins=bins, peers_dir=PEERS_DIR,
        sut_cpus=sut, load_cpus=load, metrics_addr=a.metrics_addr, prom_sd_dir=sd_dir, work_dir=work)
    doc = results.new_document(
        a.suite,
        {"duration_s": settings.duration, "probe_s": settings.probe, "warmup_s": settings.warmup,
         "repeat": settings.repeat, "levels": list(settings.levels), "search_steps": settings.search_steps,
         "only": a.only or []},
        {"systems": sut, "load": load}, {"path": load_bin, "version": engine_version(load_bin)},
        ["perfkit"] + list(argv))
    runs = [(ServerRun if sc.kind == "server" else ClientRun)(sc, members, settings, None)
            for sc, members in selection]
    progress = Progress(sum(r.steps() for r in runs), quiet=a.quiet)
    for r in runs:
        r.progress = progress
    progress.say(f"perfkit bench: {a.suite} suite, {len(runs)} scenario(s), systems on CPU {sut}, "
                 f"load on CPU {load}; output in {out}")
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    status = 0
    try:
        for r in runs:
            try:
                rec = r.run()
            except KeyboardInterrupt:
                r.record["status"] = "interrupted"
                doc["scenarios"].append(r.record)
                raise
            doc["scenarios"].append(rec)
            if rec["status"] != "ok":
                status = 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        progress.say("perfkit: interrupted: stopping every process, writing what was measured")
        doc["interrupted"] = True
        status = 130
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, old)
    doc["finished"] = results.now_iso()
    try:
        results.validate(doc)
    except results.ResultsError as e:
        print(f"perfkit: warning: {e}", file=sys.stderr)
    paths = write_reports(doc, out)
    try:
        paths.append(history.append(doc, out))
    except OSError as e:  # the run's own files are written: a read-only parent must not fail it
        print(f"perfkit: warning: cannot append to the run index: {e.strerror or e}", file=sys.stderr)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if not a.quiet:
        print(report_md.summary_table(doc))
    print(f"\nperfkit: results in {out}")
    for p in paths:
        print(f"  {p}")
    return status


def run_compare(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="perfkit compare",
        description="What got worse or better from results A to results B: figures keyed by absolute rates, "
                    "judged by a bootstrap 95% interval of B/A of the medians over the repeats and a minimum "
                    "change. Refuses runs not measured the same way (suite, engine, machine, settings).")
    p.add_argument("a", help="results.json (or its folder) of the baseline")
    p.add_argument("b", help="results.json (or its folder) to compare with it")
    p.add_argument("--min-change", type=_fraction, default=compare_mod.MIN_CHANGE, metavar="FRACTION",
                   help="smallest change that counts, e.g. 0.05 or 5%% (default 5%%)")
    p.add_argument("--force", action="store_true",
                   help="compare even when A and B were not measured the same way (the mismatches are printed)")
    p.add_argument("--all", action="store_true", help="also list the figures that stayed the same")
    p.add_argument("--fail-on-slower", action="store_true", help="exit 1 when any figure got worse")
    p.add_argument("--json", metavar="OUT", help="write the comparison there")
    p.add_argument("--seed", type=int, default=1, help="bootstrap seed (default 1)")
    a = p.parse_args(argv)
    try:
        da = results.load(_user_path(a.a))
        db = results.load(_user_path(a.b))
    except results.ResultsError as e:
        print(f"perfkit compare: error: {e}", file=sys.stderr)
        return 2
    mismatched = compare_mod.mismatches(da, db)
    if mismatched and not a.force:
        print("perfkit compare: error: A and B were not measured the same way (--force compares anyway):\n"
              + "\n".join(f"  {m}" for m in mismatched), file=sys.stderr)
        return 2
    changes = compare_mod.compare(da, db, a.min_change, seed=a.seed)
    sys.stdout.write(compare_mod.render(changes, a.a, a.b, show_same=a.all, mismatched=mismatched,
                                        missing=(compare_mod.only_in(da, db), compare_mod.only_in(db, da)),
                                        min_change=a.min_change))
    if a.json:
        doc = compare_mod.to_json(changes, a.a, a.b, mismatched=mismatched, forced=a.force,
                                  min_change=a.min_change, seed=a.seed)
        try:
            with open(_user_path(a.json), "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
        except OSError as e:
            print(f"perfkit compare: error: cannot write {a.json}: {e.strerror or e}", file=sys.stderr)
            return 2
    return 1 if a.fail_on_slower and any(c.verdict == "worse" for c in changes) else 0


def run_report(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="perfkit report", description="Re-render report.md and report.html.")
    p.add_argument("results", help="results.json or its folder")
    a = p.parse_args(argv)
    try:
        doc = results.load(_user_path(a.results))
    except results.ResultsError as e:
        print(f"perfkit report: error: {e}", file=sys.stderr)
        return 2
    src = _user_path(a.results)
    out = src if os.path.isdir(src) else os.path.dirname(src)
    for path in write_reports(doc, out)[1:]:
        print(path)
    return 0


def _fraction(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (0.05) or a percentage (5%)") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1 (or 0% and 100%)")
    return v


def paired_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="perfkit paired",
        description="Paired A/B of two systems of one server scenario: both run side by side, many short "
                    "closed-loop rounds in alternating order, the ratio variant / base per block of two rounds, "
                    "its median and geometric mean with bootstrap 95% intervals; writes paired.json and paired.md.")
    p.add_argument("base", metavar="SCENARIO/BASE",
                   help="the reference system, e.g. aquilia_app/aquilia_app-nometrics")
    p.add_argument("variant", metavar="SCENARIO/VARIANT",
                   help="the system compared with it, e.g. aquilia_app/aquilia_app")
    p.add_argument("--workload", help="workload name (default: the scenario's first)")
    p.add_argument("--rounds", type=_rounds, default=40, help="rounds, each measuring both systems (default 40)")
    p.add_argument("--round", dest="round_s", type=_positive, default=2.0,
                   help="seconds each system is measured per round (default 2)")
    p.add_argument("--warmup", type=_positive, default=2.0, help="seconds of warm-up per system before round 1")
    p.add_argument("--max-cost", type=_fraction, metavar="FRACTION",
                   help="the claim to check, e.g. 0.05 or 5%%: variant req/s >= (1 - FRACTION) x base's")
    p.add_argument("--concurrent", action="store_true",
                   help="load both systems at the same time, sharing their CPU set: the ratio of CPU cost per "
                        "request, with the machine's fluctuations hitting both alike (far tighter intervals)")
    p.add_argument("--seed", type=int, default=1, help="bootstrap seed (default 1)")
    p.add_argument("--out", help="output folder (default: results/paired-<timestamp> in the workspace)")
    p.add_argument("--scenarios", help="scenario folder (default: perfkit/scenarios)")
    p.add_argument("--bin", action="append", type=_bin, default=[], metavar="NAME=PATH",
                   help="where a binary named in the scenarios or perfkit-load is")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    return p


def _paired_selection(reg: Registry, base: str, variant: str, workload: str | None):
    names = []
    for item in (base, variant):
        if "/" not in item:
            raise ScenarioError(f"{item!r}: name a system as SCENARIO/SYSTEM")
        names.append(item.split("/", 1))
    if names[0][0] != names[1][0]:
        raise ScenarioError(f"{base} and {variant}: both systems must be of the same scenario")
    if names[0][1] == names[1][1]:
        raise ScenarioError(f"{base}: base and variant are the same system")
    sc = reg.get(names[0][0])
    if sc.kind != "server":
        raise ScenarioError(f"scenario {sc.name!r} is a {sc.kind} scenario: paired runs compare servers")
    for _, member in names:
        if member not in sc.member_names():
            raise ScenarioError(f"unknown system {member!r} in scenario {sc.name!r} "
                                f"(valid: {', '.join(sc.member_names())})")
    if not sc.workloads:
        raise ScenarioError(f"scenario {sc.name!r} has no workloads")
    if workload is None:
        w = sc.workloads[0]
    else:
        by = {x.name: x for x in sc.workloads}
        if workload not in by:
            raise ScenarioError(f"unknown workload {workload!r} in scenario {sc.name!r} (valid: {', '.join(by)})")
        w = by[workload]
    systems = {m.name: m for m in sc.systems}
    for _, member in names:
        if not systems[member].serves(w.name):
            raise ScenarioError(f"system {member!r} does not serve workload {w.name!r} "
                                f"(its workloads: {', '.join(systems[member].workloads)})")
    return sc, names[0][1], names[1][1], w


def run_paired(argv: list[str]) -> int:
    a = paired_parser().parse_args(argv)
    try:
        reg = Registry.load(_user_path(a.scenarios) if a.scenarios else None)
        sc, base, variant, w = _paired_selection(reg, a.base, a.variant, a.workload)
    except ScenarioError as e:
        print(f"perfkit paired: error: {e}", file=sys.stderr)
        return 2
    bins = resolve_bins(dict(a.bin))
    load_bin, err = _load_engine(bins)
    sut, load = procs.cpu_sets()
    out = _user_path(a.out) if a.out else _default_out("paired-")
    err = err or _output_folder(out)
    if err:
        print(f"perfkit paired: error: {err}", file=sys.stderr)
        return 2
    settings = Settings(load_bin=load_bin, bins=bins, peers_dir=PEERS_DIR, sut_cpus=sut, load_cpus=load,
                        work_dir=os.path.join(out, "logs"))
    ps = PairedSettings(rounds=a.rounds, round_s=a.round_s, warmup_s=a.warmup, max_cost=a.max_cost, seed=a.seed,
                        concurrent=a.concurrent)
    run = PairedRun(sc, base, variant, w, settings, ps, None)
    progress = Progress(run.steps(), quiet=a.quiet)
    run.progress = progress
    progress.say(f"perfkit paired: {sc.name}/{variant} / {base} on {w.name}, {ps.rounds} rounds of {ps.round_s:g} s"
                 f"{', both at once' if ps.concurrent else ''}; "
                 f"systems on CPU {sut}, load on CPU {load}; output in {out}")
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    interrupted = False
    try:
        rec = run.run()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        progress.say("perfkit paired: interrupted: stopping both systems, writing the rounds measured")
        rec = run.record
        rec["status"] = "interrupted"
        interrupted = True
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, old)
    rec["git_commit"] = results.git_commit()
    rec["cpu_sets"] = {"systems": sut, "load": load}
    rec["machine"] = results.machine()
    paths = paired_mod.write(rec, out)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(paired_mod.render(rec))
    print(f"perfkit paired: results in {out}")
    for p in paths:
        print(f"  {p}")
    if interrupted:
        return 130
    if rec["status"] != "ok":
        return 1
    return 1 if rec["verdict"] in ("over", "undecided") else 0


def gate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="perfkit gate",
        description="A short paired check for CI: the variant and base of a baseline file loaded at the same time "
                    "on one CPU set (paired --concurrent); passes while the bootstrap 95% interval of the measured "
                    "req/s ratio reaches the stored ratio x (1 - tolerance), fails when it is wholly below.")
    p.add_argument("baseline", metavar="BASELINE.toml", help="e.g. perfkit/gates/aquilia_app.toml")
    p.add_argument("--rounds", type=_rounds, default=6, help="rounds, even (default 6)")
    p.add_argument("--round", dest="round_s", type=_positive, default=1.0,
                   help="seconds both systems are measured per round (default 1)")
    p.add_argument("--warmup", type=_positive, default=1.0, help="seconds of warm-up per system (default 1)")
    p.add_argument("--seed", type=int, default=1, help="bootstrap seed (default 1)")
    p.add_argument("--out", help="keep paired.json, paired.md and the logs there (default: nothing is kept)")
    p.add_argument("--scenarios", help="scenario folder (default: perfkit/scenarios)")
    p.add_argument("--bin", action="append", type=_bin, default=[], metavar="NAME=PATH",
                   help="where a binary named in the scenarios or perfkit-load is")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    return p


def _workspace_path(p: str) -> str:
    """As _user_path; a relative path missing there is looked for in the workspace (committed files)."""
    path = _user_path(p)
    ws = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
    if not os.path.exists(path) and ws and not os.path.isabs(p):
        return os.path.join(ws, p)
    return path


def run_gate(argv: list[str]) -> int:
    a = gate_parser().parse_args(argv)
    try:
        bl = gate_mod.load(_workspace_path(a.baseline))
        reg = Registry.load(_user_path(a.scenarios) if a.scenarios else None)
        sc, base, variant, w = _paired_selection(reg, f"{bl.scenario}/{bl.base}", f"{bl.scenario}/{bl.variant}",
                                                 bl.workload)
    except (gate_mod.GateError, ScenarioError) as e:
        print(f"perfkit gate: error: {e}", file=sys.stderr)
        return 2
    bins = resolve_bins(dict(a.bin))
    load_bin, err = _load_engine(bins)
    if err:
        print(f"perfkit gate: error: {err}", file=sys.stderr)
        return 2
    sut, load = procs.cpu_sets()
    with tempfile.TemporaryDirectory(prefix="perfkit-gate-") as tmp:
        out = _user_path(a.out) if a.out else tmp
        err = _output_folder(out)
        if err:
            print(f"perfkit gate: error: {err}", file=sys.stderr)
            return 2
        settings = Settings(load_bin=load_bin, bins=bins, peers_dir=PEERS_DIR, sut_cpus=sut, load_cpus=load,
                            work_dir=os.path.join(out, "logs"))
        ps = PairedSettings(rounds=a.rounds, round_s=a.round_s, warmup_s=a.warmup, seed=a.seed, concurrent=True)
        run = PairedRun(sc, base, variant, w, settings, ps, None)
        run.progress = Progress(run.steps(), quiet=a.quiet)
        run.progress.say(f"perfkit gate: {sc.name}/{variant} ÷ {base} on {w.name}, {ps.rounds} rounds of "
                         f"{ps.round_s:g} s, both at once; systems on CPU {sut}, load on CPU {load}")
        old = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            rec = run.run()
        except KeyboardInterrupt:
            print("perfkit gate: interrupted", file=sys.stderr)
            return 130
        finally:
            procs.stop_all()
            signal.signal(signal.SIGTERM, old)
        if a.out:
            paired_mod.write(rec, out)
    verdict, lines = gate_mod.judge(bl, rec)
    print("\n".join(lines))
    return 0 if verdict == "pass" else 1


def run_trend(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="perfkit trend",
        description="The service's headline ratios to its best peer (sustainable rate, CPU per request, closed-loop "
                    "max) over the bench runs of the run index: a table, and an HTML plot (plotly, self-contained).")
    p.add_argument("scenario", help="a scenario name, e.g. aquilia_app")
    p.add_argument("--workload", help="one workload only (default: every workload of the scenario)")
    p.add_argument("--index", help="the run index (default: results/index.jsonl in the workspace)")
    p.add_argument("--out", metavar="FILE.html",
                   help="where the plot goes (default: trend-SCENARIO.html beside the index)")
    a = p.parse_args(argv)
    index = _user_path(a.index) if a.index else os.path.join(os.path.dirname(_default_out()), history.INDEX)
    try:
        trend = history.rows(history.read(index), a.scenario, a.workload)
    except history.HistoryError as e:
        print(f"perfkit trend: error: {e}", file=sys.stderr)
        return 2
    out = _user_path(a.out) if a.out else os.path.join(os.path.dirname(index), f"trend-{a.scenario}.html")
    runs = len({r["created"] for r in trend})
    sys.stdout.write(f"perfkit trend: {a.scenario}, {runs} run(s) in {index}; ratios service ÷ best peer "
                     "(CPU per request: lower is better)\n\n"
                     + history.table(trend))
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(history.plot_html(trend, a.scenario))
    except OSError as e:
        print(f"perfkit trend: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"\nplot: {out}")
    return 0


def _merge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="OUT", help="write the merged result there")
    p.add_argument("--threshold", action="append", default=[], metavar="EXPR",
                   help="a perfkit-load threshold judged on the merged result (repeatable); exit 3 when one fails")
    p.add_argument("--bin", action="append", type=_bin, default=[], metavar="NAME=PATH",
                   help="where perfkit-load is (here, for the merge)")


def run_merge(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="perfkit merge",
                                description="Merge the --json results of the segments of one perfkit-load run "
                                            "(perfkit-load --segment I/N) into one result, losslessly.")
    p.add_argument("files", nargs="+", metavar="SEGMENT.json", help="one result per segment")
    _merge_options(p)
    p.add_argument("-L", "--latency", action="store_true", help="print the latency distribution and spectrum")
    a = p.parse_args(argv)
    load_bin, err = _load_engine(resolve_bins(dict(a.bin)))
    if err:
        print(f"perfkit merge: error: {err}", file=sys.stderr)
        return 2
    cmd = [load_bin, "merge"] + [_user_path(f) for f in a.files]
    if a.json:
        cmd += ["--json", _user_path(a.json)]
    for expr in a.threshold:
        cmd += ["--threshold", expr]
    if a.latency:
        cmd.append("-L")
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL).returncode
    except OSError as e:
        print(f"perfkit merge: error: cannot run {load_bin}: {e.strerror or e}", file=sys.stderr)
        return 1


def distributed_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="perfkit distributed",
        usage="perfkit distributed --scheduler ADDR [options] -- ENGINE_ARGS...",
        description="Run one perfkit-load run split into segments, one per Dask worker (one worker per load host), "
                    "all starting at the same wall-clock time, and merge their results. ENGINE_ARGS are "
                    "perfkit-load's flags and URL, as for one process.")
    p.add_argument("--scheduler", required=True, metavar="ADDR", help="the Dask scheduler, e.g. tcp://HOST:8786")
    p.add_argument("--workers", metavar="A,B,...",
                   help="worker addresses or names, one segment each (default: every worker of the scheduler)")
    p.add_argument("--engine", default="perfkit-load", metavar="PATH",
                   help="the load engine on the workers (default: perfkit-load on their PATH)")
    p.add_argument("--start-delay", type=_positive, default=3.0, metavar="S",
                   help="seconds from now to the common start of the schedule (default 3)")
    p.add_argument("--deadline", type=_positive, default=3600.0, metavar="S",
                   help="give up when a segment is not back this many seconds after the start (default 3600)")
    _merge_options(p)
    return p


def run_distributed(argv: list[str]) -> int:
    if "--" not in argv:
        ours, engine_args = argv, []
    else:
        cut = argv.index("--")
        ours, engine_args = argv[:cut], argv[cut + 1:]
    p = distributed_parser()
    a = p.parse_args(ours)
    if not engine_args:
        p.error("give perfkit-load's flags and URL after --, e.g. -- -c 16 -R 2000 -d 10s http://HOST:PORT/")
    load_bin, err = _load_engine(resolve_bins(dict(a.bin)))
    if err:
        print(f"perfkit distributed: error: {err}", file=sys.stderr)
        return 2
    from distributed import Client  # Dask: imported by this command only

    from . import distributed as dist

    def say(msg: str) -> None:
        print(f"perfkit distributed: {msg}", file=sys.stderr)

    try:
        dist.check_engine_args(engine_args)
        try:
            client = Client(a.scheduler, timeout=15)
        except (OSError, TimeoutError) as e:
            raise dist.DistributedError(f"cannot reach the Dask scheduler {a.scheduler}: {e}") from None
        except ValueError as e:
            raise dist.DistributedError(f"--scheduler {a.scheduler!r}: {e}", 2) from None
        with client:
            status, _, text = dist.run_distributed(
                client, engine_args, workers=a.workers.split(",") if a.workers else None, engine=a.engine,
                merge_engine=load_bin, json_out=_user_path(a.json) if a.json else None, thresholds=a.threshold,
                start_delay=a.start_delay, deadline=a.deadline, say=say)
    except dist.DistributedError as e:
        print(f"perfkit distributed: error: {e}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("perfkit distributed: interrupted (segments already running finish their run on the workers)",
              file=sys.stderr)
        return 130
    sys.stdout.write(text)
    return status


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "paired":
        return run_paired(argv[1:])
    if argv and argv[0] == "compare":
        return run_compare(argv[1:])
    if argv and argv[0] == "gate":
        return run_gate(argv[1:])
    if argv and argv[0] == "trend":
        return run_trend(argv[1:])
    if argv and argv[0] == "report":
        return run_report(argv[1:])
    if argv and argv[0] == "merge":
        return run_merge(argv[1:])
    if argv and argv[0] == "distributed":
        return run_distributed(argv[1:])
    if argv and argv[0] == "bench":
        argv = argv[1:]
    return run_bench(argv)
