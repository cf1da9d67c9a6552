"""report.md: a summary table, then per scenario and workload a ranking table like a benchmark paper
(req/s with spread, corrected p50/p90/p99/p99.9, errors, memory, CPU), latency at each constant rate,
and the ratios of the service to each peer and to the floor. Failed systems come with their log tail."""

from __future__ import annotations


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


def ranked(sc: dict, w: dict) -> list[tuple[dict, dict]]:
    """(system record, result) of the systems with figures, fastest first."""
    by_name = {s["name"]: s for s in sc["systems"]}
    rows = [(by_name[n], r) for n, r in w["results"].items() if n in by_name and med(r["max_rps"]) is not None]
    return sorted(rows, key=lambda t: -med(t[1]["max_rps"]))


def role_max(rows, role) -> tuple[str, float] | None:
    for s, r in rows:
        if s["role"] == role:
            return s["name"], med(r["max_rps"])
    return None


def top_level(r: dict) -> dict | None:
    return r["levels"][-1] if r.get("levels") else None


def summary_rows(doc: dict) -> list[dict]:
    """One row per scenario/workload: the service against its best peer and its floor."""
    out = []
    for sc in doc["scenarios"]:
        for w in sc["workloads"]:
            rows = ranked(sc, w)
            svc = role_max(rows, "service")
            floor = role_max(rows, "floor")
            peers = [(s["name"], med(r["max_rps"])) for s, r in rows if s["role"] in ("peer", "original")]
            best = max(peers, key=lambda t: t[1]) if peers else None
            out.append({
                "scenario": sc["name"], "workload": w["name"], "kind": sc["kind"],
                "service": svc[0] if svc else None, "service_rps": svc[1] if svc else None,
                "best_peer": best[0] if best else None, "best_peer_rps": best[1] if best else None,
                "vs_best_peer": svc[1] / best[1] if svc and best and best[1] else None,
                "floor": floor[0] if floor else None,
                "vs_floor": svc[1] / floor[1] if svc and floor and floor[1] else None,
                "rank": next((i + 1 for i, (s, _) in enumerate(rows) if s["role"] == "service"), None),
                "systems": len(rows),
            })
    return out


def summary_table(doc: dict) -> str:
    lines = ["| scenario / workload | service req/s | rank | best peer (req/s) | service ÷ best peer | service ÷ floor |",
             "|---|---:|---:|---|---:|---:|"]
    for row in summary_rows(doc):
        lines.append(
            f"| {row['scenario']} / {row['workload']} | {fmt_rate(row['service_rps'])} | "
            f"{row['rank'] or '–'}/{row['systems']} | "
            f"{row['best_peer'] or '–'} ({fmt_rate(row['best_peer_rps'])}) | {fmt_ratio(row['vs_best_peer'])} | "
            f"{fmt_ratio(row['vs_floor'])}{' (' + row['floor'] + ')' if row['floor'] else ''} |")
    return "\n".join(lines)


def _server_workload(sc: dict, w: dict) -> list[str]:
    rows = ranked(sc, w)
    svc = role_max(rows, "service")
    floor = role_max(rows, "floor")
    out = [f"### {sc['name']} / {w['name']} — {w['method']} {w['path']} ({w['mode']}, {w['connections']} connections)",
           ""]
    if not rows:
        return out + ["No figures (every system failed).", ""]
    lvl_txt = ""
    if w["rates"]:
        lvl_txt = (f"Latencies are corrected (from the intended send time) at {fmt_rate(w['rates'][-1])} req/s, "
                   f"the highest constant rate (the same for every system: a fraction of "
                   f"{w.get('rate_reference', 'the slowest system')}'s max).")
    out += ["| # | system | role | version | max req/s | p50 | p90 | p99 | p99.9 | errors | peak RSS | CPU s | "
            "÷ service | ÷ floor |",
            "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, (s, r) in enumerate(rows, 1):
        mx = med(r["max_rps"])
        lv = top_level(r)
        lat = (lv or {}).get("latency_us", {})
        name = f"**{s['name']}**" if s["role"] == "service" else s["name"]
        out.append(
            f"| {i} | {name} | {s['role']} | {s['version']} | {fmt_rate(mx)}{spread(r['max_rps'])} | "
            f"{fmt_us(med(lat.get('p50')))} | {fmt_us(med(lat.get('p90')))} | {fmt_us(med(lat.get('p99')))} | "
            f"{fmt_us(med(lat.get('p99_9')))} | {r['errors']} | {fmt_bytes(s['peak_rss_bytes'])} | "
            f"{s['cpu_seconds']:.1f} | {fmt_ratio(mx / svc[1] if svc and svc[1] else None)} | "
            f"{fmt_ratio(mx / floor[1] if floor and floor[1] else None)} |")
    out += ["", lvl_txt, ""] if lvl_txt else [""]
    if w["rates"]:
        hdr = " | ".join(f"{fmt_rate(rate)} req/s p50 / p99" for rate in w["rates"])
        out += [f"| system | {hdr} |", "|---|" + "---:|" * len(w["rates"])]
        for s, r in rows:
            cells = []
            for rate in w["rates"]:
                lv = next((x for x in r["levels"] if abs(x["target_rate"] - rate) < 1e-6), None)
                cells.append("–" if not lv else f"{fmt_us(med(lv['latency_us']['p50']))} / "
                                                f"{fmt_us(med(lv['latency_us']['p99']))}"
                                                + (f" ({lv['errors']} err)" if lv["errors"] else ""))
            out.append(f"| {s['name']} | " + " | ".join(cells) + " |")
        out.append("")
    if svc:
        parts = [f"{mx_name}: {fmt_ratio(svc[1] / med(r['max_rps']))}" for s, r in rows
                 for mx_name in [s["name"]] if s["role"] != "service" and med(r["max_rps"])]
        if parts:
            out += [f"Ratios of {svc[0]}'s max req/s to each system: " + ", ".join(parts) + ".", ""]
    hot = {s["name"]: r["metrics"].get("hotpaths") for s, r in rows if r.get("metrics", {}).get("hotpaths")}
    if hot:
        out += ["Hot paths (from the system's /metrics over this workload, mean per call):", ""]
        for name, hp in hot.items():
            out.append(f"- {name}: " + ", ".join(f"{k} {v['mean_us']:.1f} µs" for k, v in
                                                 sorted(hp.items(), key=lambda kv: -kv[1]["mean_us"])))
        out.append("")
    return out


def _client_workload(sc: dict, w: dict) -> list[str]:
    rows = ranked(sc, w)
    svc = role_max(rows, "service")
    floor = role_max(rows, "floor")
    server = sc.get("server", {}).get("name", "the local server")
    out = [f"### {sc['name']} / {w['name']} — {w['method']} {w['path']} against {server} (one connection, back to back)",
           ""]
    if not rows:
        return out + ["No figures (every client failed).", ""]
    out += ["| # | client | role | version | req/s | p50 | p90 | p99 | p99.9 | errors | peak RSS | ÷ service | ÷ floor |",
            "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, (s, r) in enumerate(rows, 1):
        mx = med(r["max_rps"])
        lat = r.get("latency_us", {})
        name = f"**{s['name']}**" if s["role"] == "service" else s["name"]
        out.append(
            f"| {i} | {name} | {s['role']} | {s['version']} | {fmt_rate(mx)}{spread(r['max_rps'])} | "
            f"{fmt_us(med(lat.get('p50')))} | {fmt_us(med(lat.get('p90')))} | {fmt_us(med(lat.get('p99')))} | "
            f"{fmt_us(med(lat.get('p99_9')))} | {r['errors']} | {fmt_bytes(s['peak_rss_bytes'])} | "
            f"{fmt_ratio(mx / svc[1] if svc and svc[1] else None)} | "
            f"{fmt_ratio(mx / floor[1] if floor and floor[1] else None)} |")
    return out + [""]


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
           "## Summary", "", summary_table(doc), ""]
    for sc in doc["scenarios"]:
        out += [f"## {sc['name']} ({sc['kind']}){'' if sc['status'] == 'ok' else ' — ' + sc['status']}", ""]
        if sc.get("description"):
            out += [sc["description"], ""]
        for w in sc["workloads"]:
            out += _server_workload(sc, w) if sc["kind"] == "server" else _client_workload(sc, w)
        failed = [x for x in sc["systems"] if x["status"] != "ok"]
        if sc["kind"] == "client" and sc.get("server", {}).get("status") == "failed":
            failed.insert(0, sc["server"])
        for x in failed:
            out += [f"**{x['name']} {x.get('status', 'failed')}**: {x['error']}", ""]
            if x.get("log_tail"):
                out += ["```", x["log_tail"].rstrip()[-3000:], "```", ""]
    return "\n".join(out).rstrip() + "\n"
