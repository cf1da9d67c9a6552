"""report.md: a summary table (the service against its best peer: sustainable throughput at the latency SLO and
CPU per request, then the closed-loop max), then per scenario and workload a ranking table, the latency at each
constant rate, how each sustainable rate was found, ratios and hot paths. Failed systems come with their log tail.

The tables are built here as rows of plain-text cells (``Table``); this module formats them as Markdown and
``report_html`` as HTML, so both reports always show the same figures. Every field added with the sustainable
rate (``sustainable``, ``cpu_per_request_us``, ``held``, ``failures``…) is read with ``.get``: client scenarios
and results written before those fields existed have none of them."""

from __future__ import annotations

from dataclasses import dataclass, field

PEER_ROLES = ("peer", "original")


def fmt_rate(v) -> str:
    return "–" if v is None else f"{v:,.0f}"


def fmt_us(v) -> str:
    if v is None:
        return "–"
    if v >= 1_000_000:
        return f"{v / 1e6:.2f} s"
    if v >= 1000:
        return f"{v / 1000:.2f} ms"
    return f"{v:.0f} µs"


def fmt_cpu(v) -> str:
    return "–" if v is None else f"{v:,.1f}"


def fmt_bytes(v) -> str:
    if not v:
        return "–"
    return f"{v / (1 << 20):.1f} MiB"


def fmt_ratio(v) -> str:
    return "–" if v is None else f"{v:.2f}×"


def med(stat) -> float | None:
    return None if not stat else stat.get("median")


def spread(stat) -> str:
    if not stat or stat.get("spread") is None or len(stat.get("values", [])) < 2:
        return ""
    return f" ±{stat['spread'] * 50:.0f}%"


def ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def sustainable_rate(r: dict) -> float | None:
    return (r.get("sustainable") or {}).get("rate")


def cpu_per_request(r: dict) -> float | None:
    return med(r.get("cpu_per_request_us"))


def slo_us(w: dict, rows=()) -> int | None:
    """The workload's SLO, else the one a result's sustainable search used."""
    if w.get("slo_p99_us"):
        return w["slo_p99_us"]
    return next(((r.get("sustainable") or {}).get("slo_p99_us") for _, r in rows
                 if (r.get("sustainable") or {}).get("slo_p99_us")), None)


def _rank_key(r: dict):
    # the headline first; the closed-loop max orders what the headline leaves tied (and old or client results)
    rate, cpu, mx = sustainable_rate(r), cpu_per_request(r), med(r.get("max_rps"))
    return (rate is None, -(rate or 0.0), cpu is None, cpu or 0.0, -(mx or 0.0))


def ranked(sc: dict, w: dict) -> list[tuple[dict, dict]]:
    """(system record, result) of the systems with figures, best first: by sustainable rate (none last), then CPU
    per request, then closed-loop max."""
    by_name = {s["name"]: s for s in sc["systems"]}
    rows = [(by_name[n], r) for n, r in w["results"].items()
            if n in by_name and (med(r.get("max_rps")) is not None or r.get("sustainable"))]
    return sorted(rows, key=lambda t: _rank_key(t[1]))


def first_of(rows, roles) -> tuple[dict, dict] | None:
    """The best-ranked (system, result) with one of ``roles``."""
    return next(((s, r) for s, r in rows if s["role"] in roles), None)


def top_level(r: dict) -> dict | None:
    return r["levels"][-1] if r.get("levels") else None


def level_at(r: dict, rate: float) -> dict | None:
    return next((x for x in r.get("levels", []) if abs(x["target_rate"] - rate) < 1e-6), None)


def failed_cell(r: dict) -> str:
    """Failed answers, flagged, with the most frequent kinds."""
    n = r.get("errors") or 0
    if not n:
        return "0"
    kinds = sorted((r.get("failures") or {}).items(), key=lambda kv: -kv[1])[:3]
    return f"⚠ {n:,} failed" + (" (" + ", ".join(f"{k} {v:,}" for k, v in kinds) + ")" if kinds else "")


def max_cell(r: dict) -> str:
    stat = r.get("max_rps")
    cell = fmt_rate(med(stat)) + spread(stat)
    return cell + " (load-generator bound)" if r.get("load_generator_bound") else cell


def sustainable_cell(r: dict) -> str:
    sus = r.get("sustainable")
    if sus is None:
        return "–"
    if sus.get("rate") is None:
        return "none"
    # the engine, not the system, failed the step above: the system sustains at least this much
    return ("≥ " if sus.get("engine_bound") else "") + fmt_rate(sus["rate"]) + (
        " (load-generator bound)" if sus.get("engine_bound") else "")


def level_cell(lv: dict | None) -> str:
    """p50 / p99 at one constant rate, or why there is no honest latency there."""
    if not lv:
        return "–"
    if lv.get("held") is False:
        return f"not held (achieved {fmt_rate(med(lv.get('achieved_rate')))} req/s)"
    lat = lv.get("latency_us", {})
    cell = f"{fmt_us(med(lat.get('p50')))} / {fmt_us(med(lat.get('p99')))}"
    if lv.get("errors"):
        cell += f" ⚠ {lv['errors']:,} failed"
    if lv.get("engine_saturated"):
        cell += " (load-generator bound)"
    return cell


@dataclass
class Table:
    """A report table as plain-text cells; ``strong`` rows are the service's (its name is emphasised)."""
    head: list[str]
    rows: list[list[str]] = field(default_factory=list)
    text: tuple[int, ...] = (0,)  # the text columns (left-aligned); the others are figures
    name_col: int = 0
    strong: set[int] = field(default_factory=set)

    def add(self, cells: list[str], strong: bool = False) -> None:
        if strong:
            self.strong.add(len(self.rows))
        self.rows.append(cells)


def md_table(t: Table) -> str:
    def esc(c: str) -> str:
        return str(c).replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in t.head) + " |",
             "|" + "".join("---|" if i in t.text else "---:|" for i in range(len(t.head)))]
    for i, row in enumerate(t.rows):
        cells = [esc(c) for c in row]
        if i in t.strong:
            cells[t.name_col] = f"**{cells[t.name_col]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_rows(doc: dict) -> list[dict]:
    """One row per scenario/workload: the service against its best peer (the peer or original ranked first,
    never a variant of the service) and its floor. ``vs_best_peer`` and ``vs_floor`` are ratios of closed-loop
    max req/s (client scenarios: back to back); ``sustainable_vs_*`` of sustainable rates, and
    ``cpu_vs_best_peer`` of CPU per request (lower is better). ``service_result`` and ``best_peer_result`` are
    their result records ({} when there is none)."""
    out = []
    for sc in doc["scenarios"]:
        for w in sc["workloads"]:
            rows = ranked(sc, w)
            svc = first_of(rows, ("service",))
            best = first_of(rows, PEER_ROLES)
            floor = first_of(rows, ("floor",))
            sr = svc[1] if svc else {}
            br = best[1] if best else {}
            fr = floor[1] if floor else {}
            out.append({
                "scenario": sc["name"], "workload": w["name"], "kind": sc["kind"],
                "slo_p99_us": slo_us(w, rows), "cpu_rate": w.get("cpu_rate"),
                "service": svc[0]["name"] if svc else None, "service_rps": med(sr.get("max_rps")),
                "best_peer": best[0]["name"] if best else None, "best_peer_rps": med(br.get("max_rps")),
                "vs_best_peer": ratio(med(sr.get("max_rps")), med(br.get("max_rps"))),
                "floor": floor[0]["name"] if floor else None,
                "vs_floor": ratio(med(sr.get("max_rps")), med(fr.get("max_rps"))),
                "service_sustainable": sustainable_rate(sr), "best_peer_sustainable": sustainable_rate(br),
                "sustainable_vs_best_peer": ratio(sustainable_rate(sr), sustainable_rate(br)),
                "sustainable_vs_floor": ratio(sustainable_rate(sr), sustainable_rate(fr)),
                "service_cpu_us": cpu_per_request(sr), "best_peer_cpu_us": cpu_per_request(br),
                "cpu_vs_best_peer": ratio(cpu_per_request(sr), cpu_per_request(br)),
                "service_errors": sr.get("errors") or 0,
                "load_generator_bound": bool(sr.get("load_generator_bound") or br.get("load_generator_bound")),
                "service_result": sr, "best_peer_result": br,
                "rank": next((i + 1 for i, (s, _) in enumerate(rows) if s["role"] == "service"), None),
                "systems": len(rows),
            })
    return out


def summary_tables(doc: dict) -> list[tuple[str, Table]]:
    """(kind, table): one for the server scenarios, one for the client scenarios (those present)."""
    server = Table(["scenario / workload", "SLO p99", "service sustainable req/s", "best peer (sustainable req/s)",
                    "service ÷ best peer", "service CPU µs/req", "best peer CPU µs/req",
                    "CPU/req service ÷ best peer (lower is better)", "rank",
                    "closed-loop max: service (÷ best peer)", "service ÷ floor"], text=(0, 3))
    client = Table(["scenario / workload", "service req/s", "rank", "best peer (req/s)", "service ÷ best peer",
                    "service ÷ floor"], text=(0, 3))
    for row in summary_rows(doc):
        name = f"{row['scenario']} / {row['workload']}"
        rank = f"{row['rank'] or '–'}/{row['systems']}"
        server_kind = row["kind"] == "server"
        floor = "–"
        if row["floor"] and server_kind and row["sustainable_vs_floor"] is not None:
            floor = f"{fmt_ratio(row['sustainable_vs_floor'])} ({row['floor']}, sustainable)"
        elif row["floor"]:
            floor = f"{fmt_ratio(row['vs_floor'])} ({row['floor']}{', closed loop' if server_kind else ''})"
        if not server_kind:
            client.add([name, fmt_rate(row["service_rps"]) + _flag(row["service_errors"]), rank,
                        f"{row['best_peer'] or '–'} ({fmt_rate(row['best_peer_rps'])})",
                        fmt_ratio(row["vs_best_peer"]), floor])
            continue
        mx = f"{fmt_rate(row['service_rps'])} ({fmt_ratio(row['vs_best_peer'])})"
        if row["load_generator_bound"]:
            mx += " (load-generator bound)"
        server.add([name, fmt_us(row["slo_p99_us"]),
                    sustainable_cell(row["service_result"]) + _flag(row["service_errors"]),
                    f"{row['best_peer'] or '–'} ({sustainable_cell(row['best_peer_result'])})",
                    fmt_ratio(row["sustainable_vs_best_peer"]), fmt_cpu(row["service_cpu_us"]),
                    fmt_cpu(row["best_peer_cpu_us"]), fmt_ratio(row["cpu_vs_best_peer"]), rank, mx, floor])
    return [(k, t) for k, t in (("server", server), ("client", client)) if t.rows]


def _flag(errors: int) -> str:
    return f" ⚠ {errors:,} failed" if errors else ""


def summary_table(doc: dict) -> str:
    parts = []
    for kind, t in summary_tables(doc):
        if kind == "client":
            parts.append("Client scenarios (one connection, back to back):")
        parts.append(md_table(t))
    return "\n\n".join(parts)


def ranking_table(sc: dict, w: dict) -> Table:
    rows = ranked(sc, w)
    if sc["kind"] != "server":
        t = Table(["#", "client", "role", "version", "req/s", "p50", "p90", "p99", "p99.9", "errors", "peak RSS",
                   "÷ service", "÷ floor"], text=(1, 2, 3), name_col=1)
        svc = first_of(rows, ("service",))
        floor = first_of(rows, ("floor",))
        for i, (s, r) in enumerate(rows, 1):
            mx = med(r.get("max_rps"))
            lat = r.get("latency_us", {})
            t.add([str(i), s["name"], s["role"], s.get("version", ""), max_cell(r),
                   fmt_us(med(lat.get("p50"))), fmt_us(med(lat.get("p90"))), fmt_us(med(lat.get("p99"))),
                   fmt_us(med(lat.get("p99_9"))), failed_cell(r), fmt_bytes(s.get("peak_rss_bytes")),
                   fmt_ratio(ratio(mx, med(svc[1].get("max_rps")) if svc else None)),
                   fmt_ratio(ratio(mx, med(floor[1].get("max_rps")) if floor else None))],
                  strong=s["role"] == "service")
        return t
    slo = slo_us(w, rows)
    cpu_at = f" at {fmt_rate(w['cpu_rate'])} req/s" if w.get("cpu_rate") is not None else ""
    t = Table(["#", "system", "role", "version",
               f"sustainable req/s at p99 ≤ {'SLO' if slo is None else fmt_us(slo)}",
               f"CPU µs/req{cpu_at}", "closed-loop max req/s", "errors", "peak RSS", "CPU s"],
              text=(1, 2, 3), name_col=1)
    for i, (s, r) in enumerate(rows, 1):
        t.add([str(i), s["name"], s["role"], s.get("version", ""), sustainable_cell(r),
               fmt_cpu(cpu_per_request(r)) + spread(r.get("cpu_per_request_us")), max_cell(r), failed_cell(r),
               fmt_bytes(s.get("peak_rss_bytes")), f"{s.get('cpu_seconds') or 0:.1f}"],
              strong=s["role"] == "service")
    return t


def levels_table(sc: dict, w: dict) -> Table | None:
    """Corrected p50 / p99 of every system at each shared constant rate."""
    rates = w.get("rates") or []
    if sc["kind"] != "server" or not rates:
        return None
    t = Table(["system"] + [f"{fmt_rate(rate)} req/s p50 / p99" for rate in rates])
    for s, r in ranked(sc, w):
        t.add([s["name"]] + [level_cell(level_at(r, rate)) for rate in rates], strong=s["role"] == "service")
    return t


def step_text(st: dict, slo: int | None) -> str:
    """One step of the sustainable search and, when it did not count, why."""
    txt = f"{fmt_rate(st.get('rate'))}{' (retest)' if st.get('retest') else ''} → p99 {fmt_us(st.get('p99_us'))}"
    if st.get("ok"):
        return txt + " ✓"
    why = []
    if st.get("held") is False:
        why.append(f"not held, achieved {fmt_rate(st.get('achieved'))} req/s")
    if slo is not None and st.get("p99_us") is not None and st["p99_us"] > slo:
        why.append("p99 over the SLO")
    if st.get("failed"):
        why.append(f"{st['failed']:,} failed")
    if st.get("engine_saturated"):
        why.append("load-generator bound")
    return txt + " ✗" + (f" ({', '.join(why)})" if why else "")


def workload_parts(sc: dict, w: dict) -> dict:
    """A workload's section as parts both reports lay out: ``intro`` (text or None), ``ranking`` (Table or None),
    ``notes`` (list), ``levels_intro`` and ``levels`` (Table or None), ``steps`` ([(system, text)]), ``ratios``
    (list), ``hot`` ([(system, text)]) and ``empty`` (why there are no figures, or None)."""
    rows = ranked(sc, w)
    parts = {"title": workload_title(sc, w), "intro": None, "ranking": None, "notes": [], "levels_intro": None,
             "levels": None, "steps": [], "ratios": [], "hot": [], "empty": None}
    if not rows:
        parts["empty"] = "No figures (every system failed)." if sc["kind"] == "server" else \
            "No figures (every client failed)."
        return parts
    parts["ranking"] = ranking_table(sc, w)
    if sc["kind"] != "server":
        return parts
    slo = slo_us(w, rows)
    if slo is not None:
        parts["intro"] = (
            f"Sustainable req/s: the highest offered rate a system held (achieved ≥ 99 % of it) with a corrected p99 "
            f"≤ {fmt_us(slo)} and no error answer (requests still unsent at the end of a held run are not errors). "
            f"CPU per request: the server's CPU time (user + system, whole "
            f"process tree) ÷ completed requests"
            + (f" at {fmt_rate(w['cpu_rate'])} req/s, the same rate for every system" if w.get("cpu_rate")
               is not None else "") + "; lower is better.")
    for s, r in rows:
        if r.get("errors"):
            kinds = failed_cell(r).partition(" failed")[2]
            parts["notes"].append(f"⚠ {s['name']}: {r['errors']:,} failed answers over its runs{kinds}; a rate with "
                                  f"error answers never counts as sustained.")
        if r.get("load_generator_bound"):
            parts["notes"].append(f"{s['name']}: the closed-loop max is load-generator bound (perfkit-load's own CPU "
                                  f"was saturated): it is the engine's limit, not the system's.")
    parts["levels"] = levels_table(sc, w)
    if parts["levels"]:
        parts["levels_intro"] = (
            f"Latencies are corrected (from the intended send time), at the same rates for every system (fractions "
            f"of {w.get('rate_reference', 'the slowest system')}'s max); a rate a system did not hold has no honest "
            f"latency.")
    parts["steps"] = [(s["name"], "; ".join(step_text(x, slo) for x in st)) for s, r in rows
                      if (st := (r.get("sustainable") or {}).get("steps"))]
    svc = first_of(rows, ("service",))
    if svc:
        others = [(s, r) for s, r in rows if s["role"] != "service"]
        for label, get in ((f"{svc[0]['name']}'s sustainable req/s ÷ each system's", sustainable_rate),
                           (f"{svc[0]['name']}'s CPU per request ÷ each system's (lower is better)", cpu_per_request),
                           (f"{svc[0]['name']}'s closed-loop max ÷ each system's",
                            lambda r: med(r.get("max_rps")))):
            mine = get(svc[1])
            figs = [f"{s['name']} {fmt_ratio(ratio(mine, get(r)))}" for s, r in others if mine is not None and get(r)]
            if figs:
                parts["ratios"].append(f"{label}: " + ", ".join(figs) + ".")
    for s, r in rows:
        hp = (r.get("metrics") or {}).get("hotpaths")
        if hp:
            parts["hot"].append((s["name"], ", ".join(f"{k} {v['mean_us']:.1f} µs" for k, v in
                                                      sorted(hp.items(), key=lambda kv: -kv[1]["mean_us"]))))
    return parts


STEPS_INTRO = ("How each sustainable rate was found (offered req/s → corrected p99, in the order tried; "
               "✓ sustained):")
HOT_INTRO = "Hot paths (from the system's /metrics over this workload, mean per call):"


def _workload_md(sc: dict, w: dict) -> list[str]:
    p = workload_parts(sc, w)
    out = [f"### {p['title']}", ""]
    if p["empty"]:
        return out + [p["empty"], ""]
    if p["intro"]:
        out += [p["intro"], ""]
    out += [md_table(p["ranking"]), ""]
    if p["notes"]:
        out += [f"- {n}" for n in p["notes"]] + [""]
    if p["levels"]:
        out += [p["levels_intro"], "", md_table(p["levels"]), ""]
    if p["steps"]:
        out += [STEPS_INTRO, ""] + [f"- {name}: {txt}" for name, txt in p["steps"]] + [""]
    for line in p["ratios"]:
        out += [line, ""]
    if p["hot"]:
        out += [HOT_INTRO, ""] + [f"- {name}: {txt}" for name, txt in p["hot"]] + [""]
    return out


def workload_title(sc: dict, w: dict) -> str:
    if sc["kind"] == "server":
        return f"{sc['name']} / {w['name']} — {w['method']} {w['path']} ({w['mode']}, {w['connections']} connections)"
    server = sc.get("server", {}).get("name", "the local server")
    return f"{sc['name']} / {w['name']} — {w['method']} {w['path']} against {server} (one connection, back to back)"


def failed_systems(sc: dict) -> list[dict]:
    """The systems (and a client scenario's server) that failed or were skipped, to report with their log tail."""
    failed = [x for x in sc["systems"] if x["status"] != "ok"]
    if sc["kind"] == "client" and sc.get("server", {}).get("status") == "failed":
        failed.insert(0, sc["server"])
    return failed


def render(doc: dict) -> str:
    m = doc["machine"]
    s = doc["settings"]
    out = [f"# perfkit bench — {doc['suite']} suite", "",
           f"Run {doc['created']}{' (INTERRUPTED: partial results)' if doc['interrupted'] else ''}, "
           f"commit `{doc['git_commit']}`, {m['cpus']} × {m['cpu_model']}, Linux {m['kernel']}, "
           f"Python {m['python']}. Systems pinned to CPU {doc['cpu_sets']['systems']}, load engine to CPU "
           f"{doc['cpu_sets']['load']} ({doc['load_engine']['version']}).",
           f"Each figure is the median of {s['repeat']} repeat(s) (± half the spread; the repeats are rounds over the "
           f"systems, every other round reversed); probes {s['probe_s']} s "
           f"closed loop after {s['warmup_s']} s warm-up, constant-rate runs {s['duration_s']} s at "
           f"{', '.join(f'{x:.0%}' for x in s['levels'])} of the slowest system's max "
           f"(or of the scenario's rate reference, named in its section).", "",
           "## Summary", ""]
    if any(sc["kind"] == "server" for sc in doc["scenarios"]):
        out += ["Servers are ranked by sustainable throughput: the highest offered rate held with the corrected p99 "
                "within the workload's SLO and no error answer; then by CPU per request. The closed-loop max (as "
                "fast as the system answers, latency unbounded) comes second.", ""]
    out += [summary_table(doc), ""]
    for sc in doc["scenarios"]:
        out += [f"## {sc['name']} ({sc['kind']}){'' if sc['status'] == 'ok' else ' — ' + sc['status']}", ""]
        if sc.get("description"):
            out += [sc["description"], ""]
        for w in sc["workloads"]:
            out += _workload_md(sc, w)
        for x in failed_systems(sc):
            out += [f"**{x['name']} {x.get('status', 'failed')}**: {x['error']}", ""]
            if x.get("log_tail"):
                out += ["```", x["log_tail"].rstrip()[-3000:], "```", ""]
    return "\n".join(out).rstrip() + "\n"
