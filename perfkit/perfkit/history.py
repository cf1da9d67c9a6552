"""The run index: one JSON line per bench run (``results/index.jsonl``, next to the run folders) with its
headline per scenario/workload, and ``perfkit trend``: those headlines over the runs, as a table and a plot.

The headline is the report's (``report_md.summary_rows``): the service against its best peer, by sustainable
rate, CPU per request and closed-loop max. Only ratios within a run are tracked: absolute req/s move with the
machine and its load, the ratio of two systems measured in the same run much less.
"""

from __future__ import annotations

import json
import os

from . import report_md

INDEX = "index.jsonl"
# (entry key, column title); every ratio is service ÷ best peer (CPU per request: lower is better)
RATIOS = (("sustainable_ratio", "sustainable ×"), ("cpu_ratio", "CPU/req ×"), ("max_ratio", "max ×"))


class HistoryError(ValueError):
    """The index is missing or unreadable, or holds nothing for what was asked."""


def default_index(out_dir: str) -> str:
    """The index of a run folder: in its parent, beside the other runs."""
    return os.path.join(os.path.dirname(os.path.abspath(out_dir)), INDEX)


def entry(doc: dict, out_dir: str, index_path: str) -> dict:
    heads = []
    for row in report_md.summary_rows(doc):
        heads.append({
            "scenario": row["scenario"], "workload": row["workload"], "service": row["service"],
            "best_peer": row["best_peer"],
            "sustainable": {"service": row.get("service_sustainable"), "best_peer": row.get("best_peer_sustainable")},
            "sustainable_ratio": row.get("sustainable_vs_best_peer"),
            "cpu_per_request_us": {"service": row.get("service_cpu_us"), "best_peer": row.get("best_peer_cpu_us")},
            "cpu_ratio": row.get("cpu_vs_best_peer"),
            "max_rps": {"service": row["service_rps"], "best_peer": row["best_peer_rps"]},
            "max_ratio": row["vs_best_peer"],
            "service_errors": row.get("service_errors", 0),
        })
    return {
        "created": doc["created"], "git_commit": doc["git_commit"], "suite": doc["suite"],
        "interrupted": doc.get("interrupted", False),
        "out": os.path.relpath(os.path.abspath(out_dir), os.path.dirname(os.path.abspath(index_path))),
        "cpu_model": doc["machine"].get("cpu_model"), "engine": doc["load_engine"].get("version"),
        "headlines": heads,
    }


def append(doc: dict, out_dir: str, index_path: str | None = None) -> str:
    """Append the run's line to the index (created when missing); its path."""
    index_path = index_path or default_index(out_dir)
    line = json.dumps(entry(doc, out_dir, index_path), ensure_ascii=False, sort_keys=True)
    os.makedirs(os.path.dirname(os.path.abspath(index_path)), exist_ok=True)
    # one write of one line in append mode: runs appending at once do not interleave their lines
    with open(index_path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return index_path


def read(index_path: str) -> list[dict]:
    try:
        with open(index_path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise HistoryError(f"cannot read {index_path}: {e.strerror or e}") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as e:
            raise HistoryError(f"{index_path}:{n}: not JSON: {e}") from None
    return out


def rows(entries: list[dict], scenario: str, workload: str | None = None) -> list[dict]:
    """The scenario's headlines over the runs, oldest first: one dict per run and workload."""
    out = []
    for e in sorted(entries, key=lambda e: e.get("created", "")):
        for h in e.get("headlines", []):
            if h["scenario"] == scenario and workload in (None, h["workload"]):
                out.append({**h, **{k: e.get(k) for k in ("created", "git_commit", "suite", "out", "interrupted")}})
    if not out:
        known = sorted({(h["scenario"], h["workload"]) for e in entries for h in e.get("headlines", [])})
        what = scenario + (f"/{workload}" if workload else "")
        raise HistoryError(f"no run of {what} in the index (it has: "
                           f"{', '.join(f'{s}/{w}' for s, w in known) or 'nothing'})")
    return out


def _ratio(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def table(trend: list[dict]) -> str:
    head = ["created", "commit", "suite", "workload", "service", "best peer"] + [t for _, t in RATIOS] + ["failed"]
    body = []
    for r in trend:
        created = r["created"] + (" (interrupted)" if r.get("interrupted") else "")
        body.append([created, (r.get("git_commit") or "")[:12], r["suite"], r["workload"], r["service"] or "–",
                     r["best_peer"] or "–"] + [_ratio(r.get(k)) for k, _ in RATIOS]
                    + [str(r.get("service_errors", 0))])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head] + body) + "\n"


def plot_html(trend: list[dict], scenario: str) -> str:
    """A self-contained HTML page (plotly.js inlined: no network needed to open it) of the ratios over the runs."""
    import plotly.graph_objects as go  # only this command needs plotly

    fig = go.Figure()
    for workload in dict.fromkeys(r["workload"] for r in trend):
        pts = [r for r in trend if r["workload"] == workload]
        for key, title in RATIOS:
            fig.add_trace(go.Scatter(
                x=[r["created"] for r in pts], y=[r.get(key) for r in pts], mode="lines+markers",
                name=f"{workload}: {title}",
                text=[f"{(r.get('git_commit') or '')[:12]} {r['suite']}: {r['service']} ÷ {r['best_peer']}"
                      for r in pts],
                hovertemplate="%{text}<br>%{y:.2f}×<extra>%{fullData.name}</extra>"))
    fig.add_hline(y=1, line_dash="dot", line_color="grey")
    fig.update_layout(title=f"{scenario}: the service ÷ its best peer over the runs "
                            "(CPU per request: lower is better)",
                      xaxis_title="run (created, UTC)", yaxis_title="ratio (×)", hovermode="closest")
    return fig.to_html(include_plotlyjs=True, full_html=True)
