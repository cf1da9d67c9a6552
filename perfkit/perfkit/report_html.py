"""report.html: the Markdown report's tables plus plots (matplotlib, embedded as PNG):
the corrected latency percentile spectrum per system on a log "1/(1 - percentile)" axis (HdrHistogram
style), throughput bars with their spread, and hot-path breakdowns from the services' /metrics."""

from __future__ import annotations

import base64
import html
import io

import jinja2

from . import report_md

TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perfkit bench — {{ doc.suite }} suite</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:nth-child(2), td:nth-child(2) { text-align: left; }
pre { background: #f4f4f4; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
.failed { color: #b00; } img { max-width: 100%; }
</style></head><body>
<h1>perfkit bench — {{ doc.suite }} suite{% if doc.interrupted %} (interrupted){% endif %}</h1>
<p>Run {{ doc.created }}, commit <code>{{ doc.git_commit }}</code>, {{ doc.machine.cpus }} × {{ doc.machine.cpu_model }}.
Systems on CPU {{ doc.cpu_sets.systems }}, load engine on CPU {{ doc.cpu_sets.load }}.
Medians of {{ doc.settings.repeat }} repeat(s).</p>
<h2>Summary</h2>
{{ summary }}
{% for sc in sections %}
<h2>{{ sc.name }} ({{ sc.kind }}){% if sc.status != "ok" %} — <span class="failed">{{ sc.status }}</span>{% endif %}</h2>
<p>{{ sc.description }}</p>
{% for w in sc.workloads %}
<h3>{{ w.title }}</h3>
{{ w.table }}
{% for img in w.images %}<img alt="{{ img.alt }}" src="data:image/png;base64,{{ img.data }}">{% endfor %}
{% endfor %}
{% for f in sc.failed %}
<p class="failed"><b>{{ f.name }} {{ f.status or "failed" }}</b>: {{ f.error }}</p>{% if f.log_tail %}<pre>{{ f.log_tail }}</pre>{% endif %}
{% endfor %}
{% endfor %}
</body></html>
""", autoescape=True)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def spectrum_plot(title: str, series: dict) -> str | None:
    """series: {system: [[p, us], ...]} -> PNG (x = 1/(1-p), log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {k: v for k, v in series.items() if v}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for name, pts in series.items():
        xs = [1.0 / (1.0 - p) for p, _ in pts if p < 1.0]
        ys = [us / 1000.0 for p, us in pts if p < 1.0]
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    ax.set_xscale("log")
    ticks = [1, 2, 10, 100, 1000, 10000, 100000]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    ax.set_xlabel("percentile")
    ax.set_ylabel("corrected latency (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return _png(fig)


def bars_plot(title: str, rows: list[tuple[str, float, float, float, str]], ylabel: str) -> str | None:
    """rows: (label, median, min, max, role) -> PNG of bars with min..max whiskers."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        return None
    colours = {"service": "#d62728", "variant": "#ff9896", "original": "#9467bd", "peer": "#1f77b4", "floor": "#7f7f7f"}
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(rows)))
    labels = [r[0] for r in rows][::-1]
    meds = [r[1] for r in rows][::-1]
    lo = [r[1] - r[2] for r in rows][::-1]
    hi = [r[3] - r[1] for r in rows][::-1]
    ax.barh(labels, meds, xerr=[lo, hi], color=[colours.get(r[4], "#1f77b4") for r in rows][::-1], capsize=3)
    for y, v in enumerate(meds):
        ax.text(v, y, f" {v:,.0f}", va="center", fontsize="small")
    ax.set_xlabel(ylabel)
    ax.set_title(title)
    return _png(fig)


def hotpath_plot(title: str, hot: dict) -> str | None:
    """hot: {system: {hotpath: {"mean_us": x}}} -> PNG grouped bars."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hot = {k: v for k, v in hot.items() if v}
    if not hot:
        return None
    fig, ax = plt.subplots(figsize=(8, 3.5))
    names = sorted({h for v in hot.values() for h in v})
    width = 0.8 / len(hot)
    for i, (system, hp) in enumerate(hot.items()):
        xs = [j + i * width for j in range(len(names))]
        ax.bar(xs, [hp.get(n, {}).get("mean_us", 0) for n in names], width, label=system)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=20)
    ax.set_ylabel("mean µs per call")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return _png(fig)


def _md_table_to_html(md: str) -> str:
    """The Markdown tables of report_md, as HTML (escaped)."""
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    if len(lines) < 2:
        return ""
    def cells(ln):
        return [c.strip().replace("**", "") for c in ln.strip().strip("|").split("|")]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cells(lines[0]))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells(ln)) + "</tr>" for ln in lines[2:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(doc: dict) -> str:
    sections = []
    for sc in doc["scenarios"]:
        works = []
        for w in sc["workloads"]:
            rows = report_md.ranked(sc, w)
            md = "\n".join(report_md._server_workload(sc, w) if sc["kind"] == "server"
                           else report_md._client_workload(sc, w))
            tables = [t for t in md.split("\n\n") if t.lstrip().startswith("|")]
            images = []
            unit = "req/s (closed loop)" if sc["kind"] == "server" else "req/s (one connection, back to back)"
            bars = bars_plot(f"{sc['name']} / {w['name']}: throughput",
                             [(s["name"], r["max_rps"]["median"], r["max_rps"]["min"], r["max_rps"]["max"], s["role"])
                              for s, r in rows], unit)
            if bars:
                images.append({"alt": "throughput", "data": bars})
            if w["rates"]:
                for idx in sorted({len(w["rates"]) - 1, 0}, reverse=True):
                    rate = w["rates"][idx]
                    series = {}
                    for s, r in rows:
                        lv = next((x for x in r["levels"] if abs(x["target_rate"] - rate) < 1e-6), None)
                        if lv:
                            series[s["name"]] = lv["spectrum"]
                    img = spectrum_plot(f"{sc['name']} / {w['name']}: latency spectrum at {rate:,.0f} req/s", series)
                    if img:
                        images.append({"alt": "latency spectrum", "data": img})
            hot = {s["name"]: r.get("metrics", {}).get("hotpaths") for s, r in rows}
            img = hotpath_plot(f"{sc['name']} / {w['name']}: hot paths", hot)
            if img:
                images.append({"alt": "hot paths", "data": img})
            works.append({"title": md.splitlines()[0].lstrip("# "),
                          "table": _markup("".join(_md_table_to_html(t) for t in tables)),
                          "images": images})
        failed = [x for x in sc["systems"] if x["status"] != "ok"]
        if sc["kind"] == "client" and sc.get("server", {}).get("status") == "failed":
            failed.insert(0, sc["server"])
        sections.append({"name": sc["name"], "kind": sc["kind"], "status": sc["status"],
                         "description": sc.get("description", ""), "workloads": works, "failed": failed})
    return TEMPLATE.render(doc=doc, sections=sections,
                           summary=_markup(_md_table_to_html(report_md.summary_table(doc))))


def _markup(s: str):
    from markupsafe import Markup
    return Markup(s)
