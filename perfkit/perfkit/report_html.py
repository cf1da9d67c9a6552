"""report.html: the tables of report.md (the same rows, from ``report_md``) with interactive plotly charts.

Per server workload: latency against offered rate (p50 and p99 of the constant-rate runs and of the sustainable
search, with the SLO), the corrected percentile spectrum (HdrHistogram style, log ``1/(1 - percentile)`` axis),
p99 over time at the highest shared rate, CPU per request, throughput (sustainable and closed-loop max) and hot
paths; per client workload, req/s. plotly.js is inlined once in the page, so it opens offline and from a file.
Every chart is a ``div.perfkit-chart`` whose id is built from its scenario, workload and kind (stable between
runs, so links to a chart keep working)."""

from __future__ import annotations

import json
import re

import jinja2
from markupsafe import Markup

from . import report_md as md

# plotly is imported where a chart is made: every command of the CLI imports this module, few draw charts

ROLE_COLOURS = {"service": "#d62728", "variant": "#ff9896", "original": "#9467bd", "floor": "#7f7f7f"}
PEER_PALETTE = ("#1f77b4", "#2ca02c", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#393b79")
LEVEL_DASHES = ("dot", "dash", "solid")
SPECTRUM_TICKS = ((1, "0%"), (2, "50%"), (10, "90%"), (100, "99%"), (1000, "99.9%"), (10_000, "99.99%"),
                  (100_000, "99.999%"), (1_000_000, "99.9999%"))
PLOT_CONFIG = {"responsive": True, "displaylogo": False}

TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perfkit bench — {{ doc.suite }} suite</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th.t, td.t { text-align: left; }
tr.service td.name { font-weight: bold; }
pre { background: #f4f4f4; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
.failed { color: #b00; }
.perfkit-chart { width: 100%; height: 430px; margin: 0.5em 0 1.5em; }
</style>
{% if plotlyjs %}<script>{{ plotlyjs }}</script>{% endif %}
</head><body>
{%- macro table(t) %}
<table><thead><tr>{% for h, cls in t.head %}<th{% if cls %} class="{{ cls }}"{% endif %}>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>{% for tr, cells in t.rows %}
<tr{% if tr %} class="{{ tr }}"{% endif %}>{% for c, cls in cells %}<td{% if cls %} class="{{ cls }}"{% endif %}>{{ c }}</td>
{%- endfor %}</tr>{% endfor %}
</tbody></table>
{%- endmacro %}
<h1>perfkit bench — {{ doc.suite }} suite{% if doc.interrupted %} (interrupted: partial results){% endif %}</h1>
<p>Run {{ doc.created }}, commit <code>{{ doc.git_commit }}</code>, {{ doc.machine.cpus }} × {{ doc.machine.cpu_model }}.
Systems on CPU {{ doc.cpu_sets.systems }}, load engine on CPU {{ doc.cpu_sets.load }}.
Medians of {{ doc.settings.repeat }} repeat(s) (± half the spread).</p>
<h2>Summary</h2>
{% if has_server %}<p>Servers are ranked by sustainable throughput: the highest offered rate held with the corrected p99
within the workload's SLO and no error answer; then by CPU per request. The closed-loop max (as fast as the system
answers, latency unbounded) comes second.</p>{% endif %}
{% for kind, t in summary %}{% if kind == "client" %}<p>Client scenarios (one connection, back to back):</p>{% endif %}
{{ table(t) }}{% endfor %}
{% for sc in sections %}
<h2>{{ sc.name }} ({{ sc.kind }}){% if sc.status != "ok" %} — <span class="failed">{{ sc.status }}</span>{% endif %}</h2>
{% if sc.description %}<p>{{ sc.description }}</p>{% endif %}
{% for w in sc.workloads %}{% set p = w.parts %}
<h3>{{ p.title }}</h3>
{% if p.empty %}<p>{{ p.empty }}</p>{% endif %}
{% if p.intro %}<p>{{ p.intro }}</p>{% endif %}
{% if p.ranking %}{{ table(p.ranking) }}{% endif %}
{% if p.notes %}<ul>{% for n in p.notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
{% if p.levels %}<p>{{ p.levels_intro }}</p>{{ table(p.levels) }}{% endif %}
{% if p.steps %}<p>{{ steps_intro }}</p>
<ul>{% for name, txt in p.steps %}<li>{{ name }}: {{ txt }}</li>{% endfor %}</ul>{% endif %}
{% for line in p.ratios %}<p>{{ line }}</p>{% endfor %}
{% if p.hot %}<p>{{ hot_intro }}</p>
<ul>{% for name, txt in p.hot %}<li>{{ name }}: {{ txt }}</li>{% endfor %}</ul>{% endif %}
{% for chart in w.charts %}{{ chart }}{% endfor %}
{% endfor %}
{% for f in sc.failed %}
<p class="failed"><b>{{ f.name }} {{ f.status or "failed" }}</b>: {{ f.error }}</p>
{% if f.log_tail %}<pre>{{ f.log_tail[-3000:] }}</pre>{% endif %}
{% endfor %}
{% endfor %}
</body></html>
""", autoescape=True)


def html_table(t: md.Table) -> dict:
    """report_md's Table with the HTML classes of its cells: text columns left-aligned, the service's name bold."""
    def cls(i, strong=False):
        return " ".join(c for c, on in (("t", i in t.text), ("name", strong and i == t.name_col)) if on)
    return {"head": [(h, cls(i)) for i, h in enumerate(t.head)],
            "rows": [("service" if r in t.strong else "", [(c, cls(i, r in t.strong)) for i, c in enumerate(row)])
                     for r, row in enumerate(t.rows)]}


def _ms(us):
    return None if us is None else us / 1000.0


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def colours(rows) -> dict[str, str]:
    """A colour per system, the same in every chart of a workload: the role's, or the next of the palette."""
    out, used, nxt = {}, set(), 0
    for s, _ in rows:
        if s["role"] in ROLE_COLOURS and s["role"] not in used:
            used.add(s["role"])
            out[s["name"]] = ROLE_COLOURS[s["role"]]
        else:
            out[s["name"]] = PEER_PALETTE[nxt % len(PEER_PALETTE)]
            nxt += 1
    return out


class Charts:
    """The page's charts: a div per figure, drawn by a script right after it (plotly.js is in the head)."""

    def __init__(self):
        self.ids: set[str] = set()

    def div(self, parts: tuple[str, ...], fig) -> Markup:
        base = "chart-" + "-".join(_slug(p) for p in parts)
        cid, n = base, 2
        while cid in self.ids:  # two workloads whose names slug alike
            cid, n = f"{base}-{n}", n + 1
        self.ids.add(cid)
        import plotly.io as pio

        # "<" only occurs inside JSON strings: escaped, no name can end the script element early
        spec = pio.to_json(fig, validate=False).replace("<", "\\u003c")
        return Markup(f'<div id="{cid}" class="perfkit-chart"></div>\n<script>(function () {{ '
                      f'var f = {spec}; Plotly.newPlot("{cid}", f.data, f.layout, {json.dumps(PLOT_CONFIG)}); '
                      f'}})();</script>\n')


def _figure(title: str, xaxis: dict, yaxis: dict, **layout):
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(title={"text": title}, template="plotly_white", xaxis=xaxis, yaxis=yaxis,
                      margin={"l": 70, "r": 20, "t": 60, "b": 60}, hovermode="closest",
                      legend={"font": {"size": 11}}, **layout)
    return fig


def _slo_trace(slo_us, x0, x1):
    import plotly.graph_objects as go

    # a trace rather than a layout shape: it is in the legend and needs no log-axis coordinates
    return go.Scatter(x=[x0, x1], y=[_ms(slo_us)] * 2, mode="lines", name=f"SLO: p99 ≤ {md.fmt_us(slo_us)}",
                      line={"color": "#000", "dash": "dash", "width": 1.5}, hoverinfo="name")


def latency_vs_rate(w: dict, rows, col) -> object | None:
    """p50 and p99 per system against the offered rate: the constant-rate runs and the sustainable search."""
    import plotly.graph_objects as go

    slo = md.slo_us(w, rows)
    fig = _figure(f"{w['name']}: corrected latency against offered rate", {"title": {"text": "offered rate (req/s)"}},
                  {"title": {"text": "corrected latency (ms)"}, "type": "log"})
    rates = []
    for s, r in rows:
        pts = {}
        for st in (r.get("sustainable") or {}).get("steps") or []:
            pts[st["rate"]] = (st.get("p50_us"), st.get("p99_us"), st.get("held", True), st.get("achieved"))
        for lv in r.get("levels") or []:  # medians over the repeats win over a step at the same rate
            lat = lv.get("latency_us", {})
            pts[lv["target_rate"]] = (md.med(lat.get("p50")), md.med(lat.get("p99")), lv.get("held", True),
                                      md.med(lv.get("achieved_rate")))
        if not pts:
            continue
        xs = sorted(pts)
        rates += xs
        held = [pts[x][2] is not False for x in xs]
        text = [f"achieved {md.fmt_rate(pts[x][3])} req/s" + ("" if h else " — not held") for x, h in zip(xs, held)]
        symbols = ["circle" if h else "x" for h in held]
        for i, (label, dash) in enumerate((("p99", "solid"), ("p50", "dot"))):
            fig.add_trace(go.Scatter(
                x=xs, y=[_ms(pts[x][1 - i]) for x in xs], mode="lines+markers", name=f"{s['name']} {label}",
                legendgroup=s["name"], line={"color": col[s["name"]], "dash": dash},
                marker={"symbol": symbols, "size": 8}, text=text,
                hovertemplate=f"{s['name']} {label}: %{{y:.3f}} ms at %{{x:,.0f}} req/s<br>%{{text}}<extra></extra>"))
    if not fig.data:
        return None
    if slo is not None:
        fig.add_trace(_slo_trace(slo, min(rates), max(rates)))
    return fig


def spectrum(w: dict, rows, col) -> object | None:
    """The corrected percentile spectrum of each system at each shared rate (the highest shown, others a click
    away in the legend)."""
    import plotly.graph_objects as go

    fig = _figure(f"{w['name']}: corrected latency by percentile",
                  {"title": {"text": "percentile"}, "type": "log", "tickvals": [t for t, _ in SPECTRUM_TICKS],
                   "ticktext": [label for _, label in SPECTRUM_TICKS]},
                  {"title": {"text": "corrected latency (ms)"}, "type": "log"})
    rates = w.get("rates") or []
    for s, r in rows:
        for i, rate in enumerate(rates):
            lv = md.level_at(r, rate)
            pts = [(p, us) for p, us in (lv or {}).get("spectrum") or [] if p < 1.0]
            if not pts:
                continue
            top = i == len(rates) - 1
            name = f"{s['name']} at {md.fmt_rate(rate)} req/s" + (" (not held)" if lv.get("held") is False else "")
            fig.add_trace(go.Scatter(
                x=[1.0 / (1.0 - p) for p, _ in pts], y=[_ms(us) for _, us in pts], mode="lines+markers", name=name,
                line={"color": col[s["name"]], "dash": LEVEL_DASHES[max(0, len(LEVEL_DASHES) - len(rates) + i)]},
                marker={"size": 5}, visible=True if top else "legendonly",
                customdata=[f"p{p * 100:g}" for p, _ in pts],
                hovertemplate=f"{name}<br>%{{customdata}}: %{{y:.3f}} ms<extra></extra>"))
    return fig if fig.data else None


def timeline(w: dict, rows, col) -> object | None:
    """p99 per interval of the last repeat at the highest shared rate, one trace per system."""
    import plotly.graph_objects as go

    rates = w.get("rates") or []
    if not rates:
        return None
    top = rates[-1]
    fig = _figure(f"{w['name']}: p99 over time at {md.fmt_rate(top)} req/s (last repeat)",
                  {"title": {"text": "time (s)"}}, {"title": {"text": "corrected p99 per interval (ms)"},
                                                    "type": "log"})
    ts = []
    for s, r in rows:
        lv = md.level_at(r, top)
        tl = [x for x in (lv or {}).get("timeline") or [] if x.get("p99_us") is not None]
        if not tl:
            continue
        ts += [x["t_s"] for x in tl]
        fig.add_trace(go.Scatter(
            x=[x["t_s"] for x in tl], y=[_ms(x["p99_us"]) for x in tl], mode="lines+markers", name=s["name"],
            line={"color": col[s["name"]]},
            marker={"symbol": ["x" if x.get("failed") else "circle" for x in tl], "size": 7},
            text=[f"{md.fmt_rate(x.get('rate'))} req/s answered, p50 {md.fmt_us(x.get('p50_us'))}"
                  + (f", {x['failed']:,} failed" if x.get("failed") else "") for x in tl],
            hovertemplate=f"{s['name']} at %{{x}} s: p99 %{{y:.3f}} ms<br>%{{text}}<extra></extra>"))
    if not fig.data:
        return None
    slo = md.slo_us(w, rows)
    if slo is not None:
        fig.add_trace(_slo_trace(slo, min(ts), max(ts)))
    return fig


def _bars(title: str, axis: str, bars: list[tuple[str, dict | None, str]], unit: str):
    """bars: (label, stat, colour) -> a figure of one bar trace with min..max whiskers (None without figures)."""
    bars = [(label, st, c) for label, st, c in bars if md.med(st) is not None]
    if not bars:
        return None
    fig = _figure(title, {}, {"title": {"text": axis}})
    fig.add_trace(_bar_trace(unit, unit, bars))
    return fig


def _bar_trace(name: str, unit: str, bars, **kw):
    import plotly.graph_objects as go

    meds = [md.med(st) for _, st, _ in bars]
    # whiskers from the slowest to the fastest repeat (none where a stat lacks them)
    hi = [(st.get("max") if st.get("max") is not None else m) - m for (_, st, _), m in zip(bars, meds)]
    lo = [m - (st.get("min") if st.get("min") is not None else m) for (_, st, _), m in zip(bars, meds)]
    return go.Bar(
        x=[label for label, _, _ in bars], y=meds, name=name, marker={"color": [c for _, _, c in bars]},
        error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
        hovertemplate=f"%{{x}}: %{{y:,.1f}} {unit}<extra></extra>", **kw)


def cpu_bars(w: dict, rows, col):
    at = f" at {md.fmt_rate(w['cpu_rate'])} req/s" if w.get("cpu_rate") is not None else ""
    return _bars(f"{w['name']}: CPU per request{at} (lower is better)", "server CPU µs per request",
                 [(s["name"], r.get("cpu_per_request_us"), col[s["name"]]) for s, r in rows], "µs/req")


def throughput_bars(w: dict, rows, col):
    """Sustainable rate next to the closed-loop max, per system."""
    import plotly.graph_objects as go

    sus = [(s["name"], md.sustainable_rate(r)) for s, r in rows]
    if all(v is None for _, v in sus):
        return None
    slo = md.slo_us(w, rows)
    fig = _figure(f"{w['name']}: throughput", {}, {"title": {"text": "req/s"}}, barmode="group")
    fig.add_trace(go.Bar(x=[n for n, _ in sus], y=[v for _, v in sus], marker={"color": [col[n] for n, _ in sus]},
                         name=f"sustainable at p99 ≤ {md.fmt_us(slo)}",
                         hovertemplate="%{x}: %{y:,.0f} req/s sustainable<extra></extra>"))
    mx = [(s["name"], r.get("max_rps"), col[s["name"]]) for s, r in rows if md.med(r.get("max_rps")) is not None]
    if mx:
        fig.add_trace(_bar_trace("closed-loop max", "req/s closed-loop max", mx, opacity=0.45))
    return fig


def hotpath_bars(w: dict, rows, col):
    import plotly.graph_objects as go

    hot = {s["name"]: (r.get("metrics") or {}).get("hotpaths") for s, r in rows}
    hot = {k: v for k, v in hot.items() if v}
    if not hot:
        return None
    names = sorted({h for v in hot.values() for h in v})
    fig = _figure(f"{w['name']}: hot paths (from /metrics)", {}, {"title": {"text": "mean µs per call"}},
                  barmode="group")
    for system, hp in hot.items():
        fig.add_trace(go.Bar(x=names, y=[hp.get(n, {}).get("mean_us") for n in names], name=system,
                             marker={"color": col[system]},
                             hovertemplate=f"{system} %{{x}}: %{{y:.1f}} µs<extra></extra>"))
    return fig


def workload_charts(charts: Charts, sc: dict, w: dict) -> list[Markup]:
    rows = md.ranked(sc, w)
    if not rows:
        return []
    col = colours(rows)
    if sc["kind"] == "server":
        figs = [("latency-vs-rate", latency_vs_rate(w, rows, col)), ("spectrum", spectrum(w, rows, col)),
                ("timeline", timeline(w, rows, col)), ("cpu-per-request", cpu_bars(w, rows, col)),
                ("throughput", throughput_bars(w, rows, col)), ("hot-paths", hotpath_bars(w, rows, col))]
        if figs[4][1] is None:  # results without a sustainable rate: the closed-loop max alone, as before
            figs[4] = ("throughput", _bars(f"{w['name']}: throughput (closed loop)", "req/s",
                                           [(s["name"], r.get("max_rps"), col[s["name"]]) for s, r in rows],
                                           "req/s"))
    else:
        figs = [("throughput", _bars(f"{w['name']}: req/s (one connection, back to back)", "req/s",
                                     [(s["name"], r.get("max_rps"), col[s["name"]]) for s, r in rows], "req/s"))]
    return [charts.div((sc["name"], w["name"], kind), fig) for kind, fig in figs if fig is not None]


def render(doc: dict) -> str:
    charts = Charts()
    sections = []
    for sc in doc["scenarios"]:
        works = []
        for w in sc["workloads"]:
            parts = md.workload_parts(sc, w)
            for key in ("ranking", "levels"):
                parts[key] = parts[key] and html_table(parts[key])
            works.append({"parts": parts, "charts": workload_charts(charts, sc, w)})
        sections.append({"name": sc["name"], "kind": sc["kind"], "status": sc["status"],
                         "description": sc.get("description", ""), "workloads": works,
                         "failed": md.failed_systems(sc)})
    plotlyjs = None
    if charts.ids:
        from plotly.offline import get_plotlyjs

        plotlyjs = Markup(get_plotlyjs().replace("</script", "<\\/script"))
    summary = [(kind, html_table(t)) for kind, t in md.summary_tables(doc)]
    return TEMPLATE.render(doc=doc, sections=sections, summary=summary, plotlyjs=plotlyjs,
                           has_server=any(sc["kind"] == "server" for sc in doc["scenarios"]),
                           steps_intro=md.STEPS_INTRO, hot_intro=md.HOT_INTRO)
