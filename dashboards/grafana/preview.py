"""Render a PNG preview of each dashboard from its JSON and a real Prometheus: every panel's queries run
through Prometheus's HTTP API and drawn at the panel's grid position (time series as lines, heatmaps
from the bucket counts). Not a Grafana screenshot — the Grafana that builds here has no browser UI —
but the same queries, layout, units and legends.

    python dashboards/grafana/preview.py --prometheus http://127.0.0.1:9090 --minutes 15 --out DIR
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BG, PANEL_BG, FG, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
COLORS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f43b86", "#b877d9", "#5794f2", "#fade2a", "#e02f44",
          "#56a64b", "#ca95e5", "#ffb357"]


def _query_range(base: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    url = f"{base}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(url, timeout=30) as r:
        doc = json.loads(r.read())
    if doc.get("status") != "success":
        raise RuntimeError(f"{expr}: {doc}")
    return doc["data"]["result"]


def _substitute(expr: str, values: dict[str, str], rate_interval: str) -> str:
    vals = {"__rate_interval": rate_interval, "__interval": rate_interval, "__range": "1m", **values}
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", lambda m: vals.get(m.group(1) or m.group(2), m.group(0)), expr)


def _legend(fmt: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt or "") or json.dumps(labels)


def _fmt_unit(unit: str):
    def seconds(v, _=None):
        if v == 0:
            return "0"
        for scale, suffix in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(v) >= scale:
                return f"{v / scale:.3g} {suffix}"
        return f"{v * 1e9:.3g} ns"

    table = {
        "s": seconds,
        "percentunit": lambda v, _=None: f"{v * 100:.3g}%",
        "reqps": lambda v, _=None: f"{v:.3g} req/s",
        "ops": lambda v, _=None: f"{v:.3g} ops/s",
        "Bps": lambda v, _=None: f"{v:.3g} B/s",
        "bool_yes_no": lambda v, _=None: "yes" if v >= 0.5 else "no",
    }
    return table.get(unit, lambda v, _=None: f"{v:.3g}")


def render_dashboard(dash: dict, base: str, start: float, end: float, out_path: str, values: dict[str, str],
                     rate_interval: str = "5s") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    panels = [p for p in dash["panels"]]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit_px = 30
    fig = plt.figure(figsize=(24 * 0.62, rows * unit_px / 72 * 0.95 + 0.8), facecolor=BG)
    H = rows + 2.5
    fig.text(0.01, 1 - 0.9 / H, dash["title"], color=FG, fontsize=14, weight="bold", va="center")
    step = max(1.0, (end - start) / 300)
    for p in panels:
        g = p["gridPos"]
        left, width = g["x"] / 24 + 0.004, g["w"] / 24 - 0.008
        top = 1 - (g["y"] + 2) / H
        height = g["h"] / H
        if p["type"] == "row":
            fig.text(left, top - 0.5 / H, p["title"], color=FG, fontsize=11, weight="bold", va="center")
            continue
        ax = fig.add_axes([left + 0.035, top - height + 0.9 / H, width - 0.045, height - 1.6 / H], facecolor=PANEL_BG)
        ax.set_title(p["title"], color=FG, fontsize=9, loc="left")
        for side in ax.spines.values():
            side.set_color(GRID)
        ax.tick_params(colors=FG, labelsize=7)
        ax.grid(color=GRID, linewidth=0.5)
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        if p["type"] == "heatmap":
            t = p["targets"][0]
            res = _query_range(base, _substitute(t["expr"], values, rate_interval), start, end, step)
            les = sorted(((float(r["metric"].get("le", "inf")), r) for r in res), key=lambda x: x[0])
            if les:
                times = sorted({float(ts) for _, r in les for ts, _ in r["values"]})
                idx = {ts: i for i, ts in enumerate(times)}
                cum = [[0.0] * len(times) for _ in les]
                for j, (_, r) in enumerate(les):
                    for ts, v in r["values"]:
                        x = float(v)
                        cum[j][idx[float(ts)]] = 0.0 if math.isnan(x) else x
                cells = [[max(0.0, cum[j][i] - (cum[j - 1][i] if j else 0.0)) for i in range(len(times))]
                         for j in range(len(les))]
                keep = [j for j in range(len(les)) if any(cells[j])]
                if keep:
                    lo, hi = max(0, keep[0] - 1), min(len(les), keep[-1] + 2)
                    data = [[math.sqrt(c) for c in cells[j]] for j in range(lo, hi)]
                    ax.imshow(data, aspect="auto", origin="lower", cmap="Oranges", interpolation="nearest",
                              extent=(0, len(times), 0, hi - lo))
                    fmt = _fmt_unit("s")
                    ax.set_yticks([k + 0.5 for k in range(hi - lo)])
                    ax.set_yticklabels(["≤ " + (fmt(les[j][0]) if les[j][0] != math.inf else "+Inf")
                                        for j in range(lo, hi)], fontsize=6)
                    ax.set_xticks([])
            ax.grid(False)
            continue
        n = 0
        for t in p["targets"]:
            res = _query_range(base, _substitute(t["expr"], values, rate_interval), start, end, step)
            for r in res:
                xs = [float(ts) - end for ts, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]
                ys = [float(v) for ts, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]
                if not xs:
                    continue
                ax.plot(xs, ys, color=COLORS[n % len(COLORS)], linewidth=1.2,
                        label=_legend(t.get("legendFormat", ""), r["metric"])[:48])
                n += 1
        if n == 0:
            ax.text(0.5, 0.5, "No data", color=FG, ha="center", va="center", transform=ax.transAxes)
        else:
            ax.legend(fontsize=6, facecolor=PANEL_BG, edgecolor=GRID, labelcolor=FG, loc="upper left",
                      ncol=2 if n > 4 else 1)
        ax.yaxis.set_major_formatter(FuncFormatter(_fmt_unit(unit)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _=None: f"{v:.0f}s"))
        if p.get("fieldConfig", {}).get("defaults", {}).get("min") == 0:
            ax.set_ylim(bottom=0)
    fig.savefig(out_path, dpi=72, facecolor=BG)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    p.add_argument("--minutes", type=float, default=15, help="time range: the last N minutes")
    p.add_argument("--out", required=True, help="directory for <dashboard>.png")
    p.add_argument("--dashboards", default=os.path.join(HERE, "dashboards"))
    a = p.parse_args(argv)
    if a.minutes <= 0:
        p.error("--minutes must be > 0")
    os.makedirs(a.out, exist_ok=True)
    end = time.time()
    for name in sorted(os.listdir(a.dashboards)):
        if name.endswith(".json"):
            with open(os.path.join(a.dashboards, name), encoding="utf-8") as f:
                dash = json.load(f)
            values = {v["name"]: ".+" for v in dash["templating"]["list"]}
            render_dashboard(dash, a.prometheus.rstrip("/"), end - a.minutes * 60, end,
                             os.path.join(a.out, name[:-5] + ".png"), values)
            print(f"wrote {name[:-5]}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
