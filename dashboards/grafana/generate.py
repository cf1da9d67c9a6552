"""Generate the Grafana dashboards of the perfmono services as code (grafana-foundation-sdk).

    bazel run //dashboards:generate                  # rewrite dashboards/grafana/dashboards/*.json
    python dashboards/grafana/generate.py            # the same, with grafana-foundation-sdk installed
    python dashboards/grafana/generate.py --check    # exit 1 if the committed JSON is not what this makes
    python dashboards/grafana/generate.py --out DIR  # write elsewhere

Every panel and every query use the `${datasource}` dashboard variable (a Prometheus datasource; the
provisioned one has the uid `perfmono-prometheus`). Most queries read the recording rules of
dashboards/prometheus/rules/recording.yml, so Prometheus must load them; the heatmaps and the
load-run panels read the raw histogram buckets.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

from grafana_foundation_sdk.builders import common, dashboard, heatmap, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as heatmap_models
from grafana_foundation_sdk.models import prometheus as pm

DATASOURCE_UID = "perfmono-prometheus"
DATASOURCE_NAME = "Prometheus"
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
HERE = os.path.dirname(os.path.abspath(__file__))
# `bazel run //dashboards:generate` runs from the runfiles tree: write into the workspace instead.
DEFAULT_OUT = (os.path.join(os.environ["BUILD_WORKSPACE_DIRECTORY"], "dashboards", "grafana", "dashboards")
               if os.environ.get("BUILD_WORKSPACE_DIRECTORY") else os.path.join(HERE, "dashboards"))
TAGS = ["perfmono"]


@dataclass(frozen=True)
class Service:
    name: str
    title: str
    kind: str  # "http": http_server_request_duration_seconds; "rpc": rpc_calls_total (JSON-RPC over WebSocket)
    hotpaths: tuple[str, ...]
    extra: tuple = field(default_factory=tuple)  # (title, unit, [(expr, legend)]) service-specific panels


SERVICES = (
    Service(
        "aquilia_app", "aquilia_app (Python ASGI framework)", "http",
        ("route_match", "di_scope", "handler", "serialize"),
    ),
    Service(
        "rpc_app", "rpc_app (JSON-RPC 2.0 over WebSocket)", "rpc",
        ("parse", "validate", "dispatch", "encode"),
        extra=(
            ("Open connections and calls in flight", "short", [
                ('rpc_open_connections{service="rpc_app"}', "open connections"),
                ('rpc_in_flight{service="rpc_app"}', "calls in flight"),
            ]),
        ),
    ),
    Service(
        "aurora_app", "aurora_app (D HTTP/1.1 server)", "http",
        ("parse", "handle", "write"),
        extra=(
            ("GC allocation on the worker threads (should stay 0)", "Bps", [
                ('rate(aurora_gc_allocated_bytes_total{service="aurora_app"}[$__rate_interval])', "allocated"),
            ]),
            ("Open connections", "short", [
                ('aurora_connections_open{service="aurora_app"}', "open"),
            ]),
        ),
    ),
)


# ---- small layer over the SDK ----------------------------------------------------------------

class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _query(expr: str, legend: str, ref: str, fmt: pm.PromQueryFormat | None = None) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS).range()
    if fmt is not None:
        q = q.format(fmt)
    return q


def _refs(targets):
    return [_query(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)]


def p50_p99(histogram: str, by: str, sel: str) -> list:
    """The p50 and p99 targets of a histogram per value of one label, interpolated from its buckets."""
    return [(f"histogram_quantile({q}, sum by ({by}, le) (rate({histogram}_bucket{{{sel}}}[$__rate_interval])))",
             f"{{{{{by}}}}} p{name}") for q, name in (("0.5", "50"), ("0.99", "99"))]


def ts(ids: _Ids, title: str, unit: str, targets, description: str = "", *, stack: bool = False,
       width: int = 12, height: int = 8, min0: bool = True) -> timeseries.Panel:
    p = (timeseries.Panel().id(ids()).title(title).description(description).datasource(DS).unit(unit)
         .span(width).height(height).targets(_refs(targets)).line_width(1).fill_opacity(10)
         .show_points(common_models.VisibilityMode.NEVER)
         .legend(common.VizLegendOptions().display_mode(common_models.LegendDisplayMode.TABLE)
                 .placement(common_models.LegendPlacement.BOTTOM).show_legend(True).calcs(["mean", "max", "lastNotNull"]))
         .tooltip(common.VizTooltipOptions().mode(common_models.TooltipDisplayMode.MULTI)
                  .sort(common_models.SortOrder.DESCENDING)))
    if min0:
        p = p.min(0)
    if stack:
        p = p.stacking(common.StackingConfig().mode(common_models.StackingMode.NORMAL)).fill_opacity(60)
    return p


def hm(ids: _Ids, title: str, expr: str, description: str, width: int = 12, cell_unit: str = "reqps") -> heatmap.Panel:
    return (heatmap.Panel().id(ids()).title(title).description(description).datasource(DS).unit("s")
            .span(width).height(8)
            .with_target(_query(expr, "{{le}}", "A", pm.PromQueryFormat.HEATMAP))
            .calculate(False)
            .y_axis(heatmap.YAxisConfig().unit("s"))
            .color(heatmap.HeatmapColorOptions().mode(heatmap_models.HeatmapColorMode.SCHEME).scheme("Oranges")
                   .scale(heatmap_models.HeatmapColorScale.EXPONENTIAL).exponent(0.5).steps(64))
            .cell_values(heatmap.CellValues().unit(cell_unit))
            .show_tooltip().show_y_histogram().show_legend())


def row(ids: _Ids, title: str) -> dashboard.Row:
    return dashboard.Row(title).id(ids())


def _datasource_variable() -> dashboard.DatasourceVariable:
    return (dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .current(dm.VariableOption(selected=True, text=DATASOURCE_NAME, value=DATASOURCE_UID)))


def _query_variable(name: str, label: str, query: str) -> dashboard.QueryVariable:
    return (dashboard.QueryVariable(name).label(label).datasource(DS).query(query)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*")
            .current(dm.VariableOption(selected=True, text="All", value="$__all")))


def _dashboard(uid: str, title: str, description: str) -> dashboard.Dashboard:
    return (dashboard.Dashboard(title).uid(uid).description(description).tags(TAGS).readonly()
            .time("now-15m", "now").refresh("10s").timezone("browser")
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .with_variable(_datasource_variable()))


# ---- the dashboards ----------------------------------------------------------------------------

def overview() -> dashboard.Dashboard:
    ids = _Ids()
    d = _dashboard("perfmono-overview", "perfmono: services overview",
                   "Every service side by side: throughput, error ratio, server-side p99 and the load "
                   "engine's corrected client-side p99 for the same service.")
    d = d.with_row(row(ids, "Services side by side"))
    d = d.with_panel(ts(ids, "Throughput", "reqps", [
        ("service:http_server_requests:rate1m", "{{service}} HTTP requests"),
        ("service:rpc_calls:rate1m", "{{service}} JSON-RPC calls"),
    ], "HTTP requests/s (http_server_request_duration_seconds) and JSON-RPC calls/s (rpc_calls_total), 1m rate."))
    d = d.with_panel(ts(ids, "Error ratio", "percentunit", [
        ("service:http_server_errors:ratio_rate1m", "{{service}} HTTP 5xx"),
        ("service:rpc_errors:ratio_rate1m", "{{service}} JSON-RPC errors"),
    ], "Share of HTTP requests answered 5xx, and of JSON-RPC calls answered with an error object."))
    d = d.with_panel(ts(ids, "p99: server-side vs load engine (corrected)", "s", [
        ("service:http_server_request_duration_seconds:p99_rate1m", "{{service}} server"),
        ("max by (service) (target_scenario:perfkit_load_corrected_latency_seconds:p99_rate1m)",
         "{{service}} client, corrected"),
    ], "Server-side p99 from http_server_request_duration_seconds next to perfkit-load's p99 measured from "
       "the intended send time (coordinated-omission corrected) for runs aimed at the same service. "
       "The gap is queueing the server-side timer cannot see. rpc_app has no server-side call histogram."))
    d = d.with_panel(ts(ids, "Hot-path p99 by service", "s", [
        ("service_hotpath:perfkit_hotpath_duration_seconds:p99_rate1m", "{{service}} {{hotpath}}"),
    ], "p99 of every sampled hot path (perfkit_hotpath_duration_seconds)."))
    d = d.with_panel(ts(ids, "Load engine: achieved vs target rate", "reqps", [
        ("max by (service, scenario) (perfkit_load_achieved_rate)", "{{service}} {{scenario}} achieved"),
        ("max by (service, scenario) (perfkit_load_target_rate)", "{{service}} {{scenario}} target"),
    ], "perfkit-load's target rate and achieved response rate (only while a run lasts)."))
    d = d.with_panel(ts(ids, "Scrape targets up", "bool_yes_no", [
        ("up", "{{job}} {{instance}}"),
    ], "1 when Prometheus scraped the target at its last attempt.", min0=False))
    d = d.with_row(row(ids, "SLO error-budget burn rate"))
    for slo, metric, budget, what in (
            ("Availability", "http_server_errors", "0.001", "99.9 % of requests not answered 5xx"),
            ("Latency", "http_server_slow_requests", "0.01", "99 % of requests within 100 ms")):
        d = d.with_panel(ts(ids, f"{slo} SLO: burn rate over 1h and 6h", "short", [
            (f"service:{metric}:ratio_rate1h / {budget}", "{{service}} 1h"),
            (f"service:{metric}:ratio_rate6h / {budget}", "{{service}} 6h"),
        ], f"{slo} SLO ({what}): the share of bad requests over the error budget ({budget}). 1 spends the budget "
           "exactly over 30 days; the page alerts fire at 14.4 over 1h (and 5m) and at 6 over 6h (and 30m), "
           "when the short window holds at least 100 requests (dashboards/README.md, Alerts)."))
    return d


def service_dashboard(s: Service) -> dashboard.Dashboard:
    ids = _Ids()
    sel = f'service="{s.name}"'
    d = _dashboard(f"perfmono-{s.name.replace('_', '-')}", f"perfmono: {s.title}",
                   f"{s.name}: request rate and latency, the latency heatmap and the hot-path breakdown "
                   f"({', '.join(s.hotpaths)}).")
    if s.kind == "http":
        d = d.with_row(row(ids, "Requests by route"))
        d = d.with_panel(ts(ids, "Request rate by route", "reqps", [
            (f"service_route:http_server_requests:rate1m{{{sel}}}", "{{route}}"),
        ], "Requests/s per route template (1m rate)."))
        d = d.with_panel(ts(ids, "Responses by status class", "reqps", [
            (f"sum by (status_class) (rate(http_server_request_duration_seconds_count{{{sel}}}[$__rate_interval]))",
             "{{status_class}}"),
        ], "Responses/s by status class.", stack=True))
        d = d.with_panel(ts(ids, "Latency by route: p50 / p90 / p99", "s", [
            (f"service_route:http_server_request_duration_seconds:p50_rate1m{{{sel}}}", "{{route}} p50"),
            (f"service_route:http_server_request_duration_seconds:p90_rate1m{{{sel}}}", "{{route}} p90"),
            (f"service_route:http_server_request_duration_seconds:p99_rate1m{{{sel}}}", "{{route}} p99"),
        ], "Server-side percentiles per route, interpolated from the histogram buckets (25 µs … 10 s)."))
        d = d.with_panel(ts(ids, "Error ratio by route", "percentunit", [
            (f"service_route:http_server_errors:ratio_rate1m{{{sel}}}", "{{route}}"),
        ], "Share of requests answered 5xx per route."))
        d = d.with_panel(hm(ids, "Request latency heatmap", 
                            f"sum by (le) (rate(http_server_request_duration_seconds_bucket{{{sel}}}[$__rate_interval]))",
                            "Requests per latency bucket over time (all routes), straight from the buckets."))
    else:
        d = d.with_row(row(ids, "JSON-RPC calls"))
        d = d.with_panel(ts(ids, "Call rate by method", "reqps", [
            (f"sum by (method) (rate(rpc_calls_total{{{sel}}}[$__rate_interval]))", "{{method}}"),
        ], "JSON-RPC calls/s per method (rpc_calls_total)."))
        d = d.with_panel(ts(ids, "Calls by outcome", "reqps", [
            (f"sum by (outcome) (rate(rpc_calls_total{{{sel}}}[$__rate_interval]))", "{{outcome}}"),
        ], "ok, error (the method raised), and the protocol errors: parse_error, invalid_request, "
           "not_found, invalid_params, limit, rate_limited, duplicate_id.", stack=True))
        d = d.with_panel(ts(ids, "Error ratio", "percentunit", [
            (f"service:rpc_errors:ratio_rate1m{{{sel}}}", "errors"),
        ], "Share of calls answered with a JSON-RPC error object."))
        d = d.with_panel(hm(ids, "Dispatch latency heatmap",
                            f'sum by (le) (rate(perfkit_hotpath_duration_seconds_bucket{{{sel},hotpath="dispatch"}}[$__rate_interval]))',
                            "Sampled calls per latency bucket of the dispatch stage (the method itself); the "
                            "whole call is in the call-latency panels, the load engine's corrected latency "
                            "on the load-run dashboard."))
    for title, unit, targets in s.extra:
        d = d.with_panel(ts(ids, title, unit, targets, f"{s.name}-specific metrics."))
    if s.kind == "rpc":
        d = d.with_row(row(ids, "Call latency (rpc_call_duration_seconds)"))
        d = d.with_panel(ts(ids, "Call latency by method: p50 / p99", "s",
                            p50_p99("rpc_call_duration_seconds", "method", sel),
                            "Whole-call duration per JSON-RPC method (rpc_call_duration_seconds, labels service "
                            "and method), interpolated from the buckets (25 µs … 10 s)."))
        d = d.with_panel(ts(ids, "Calls/s by method (call histogram)", "reqps", [
            (f"sum by (method) (rate(rpc_call_duration_seconds_count{{{sel}}}[$__rate_interval]))", "{{method}}"),
        ], "Calls/s per method as the call histogram counts them: the number of calls behind the percentiles."))
        d = d.with_panel(hm(ids, "Call latency heatmap",
                            f"sum by (le) (rate(rpc_call_duration_seconds_bucket{{{sel}}}[$__rate_interval]))",
                            "Calls per latency bucket over time (all methods), straight from the buckets.",
                            width=24))
    d = d.with_row(row(ids, "Hot paths"))
    hp = ", ".join(s.hotpaths)
    d = d.with_panel(ts(ids, "Hot-path p99", "s", [
        (f"service_hotpath:perfkit_hotpath_duration_seconds:p99_rate1m{{{sel}}}", "{{hotpath}}"),
    ], f"p99 of each sampled hot path ({hp})."))
    d = d.with_panel(ts(ids, "Hot-path share of request time", "percentunit", [
        (f"service_hotpath:perfkit_hotpath_duration_seconds:share_rate1m{{{sel}}}", "{{hotpath}}"),
    ], "Mean time in each hot path over the mean request time"
       + (" (rpc_app: over the sum of its hot paths)" if s.kind == "rpc" else "")
       + ". An estimate from the sampled requests: with few samples in the window (low traffic, one slow "
         "request sampled) it can exceed 100%.", stack=True))
    d = d.with_panel(ts(ids, "Hot-path mean", "s", [
        (f"service_hotpath:perfkit_hotpath_duration_seconds:mean_rate1m{{{sel}}}", "{{hotpath}}"),
    ], "Mean time per timed call of each hot path (hot paths are sampled: one request in N)."))
    d = d.with_panel(ts(ids, "Timed hot-path calls", "ops", [
        (f"sum by (hotpath) (rate(perfkit_hotpath_duration_seconds_count{{{sel}}}[$__rate_interval]))", "{{hotpath}}"),
    ], "Sampled calls/s per hot path: the sample size behind the percentiles."))
    return d


def load_run() -> dashboard.Dashboard:
    ids = _Ids()
    sel = 'target=~"$target",scenario=~"$scenario"'
    d = _dashboard("perfmono-load", "perfmono: load run (perfkit-load)",
                   "A perfkit-load run: target vs achieved rate, corrected (from the intended send time) vs "
                   "uncorrected (from the actual send) latency percentiles, outcomes.")
    d = d.with_variable(_query_variable("target", "Target", "label_values(perfkit_load_target_rate, target)"))
    d = d.with_variable(_query_variable("scenario", "Scenario",
                                        'label_values(perfkit_load_target_rate{target=~"$target"}, scenario)'))
    d = d.with_row(row(ids, "Rate"))
    d = d.with_panel(ts(ids, "Target vs achieved rate", "reqps", [
        (f"perfkit_load_target_rate{{{sel}}}", "{{scenario}} target"),
        (f"perfkit_load_achieved_rate{{{sel}}}", "{{scenario}} achieved (since start)"),
        (f"sum by (scenario) (rate(perfkit_load_requests_total{{{sel}}}[$__rate_interval]))", "{{scenario}} responses/s"),
    ], "Target rate (0 in closed-loop mode), the achieved average and the instantaneous response rate."))
    d = d.with_panel(ts(ids, "Requests by outcome", "reqps", [
        (f"sum by (outcome) (rate(perfkit_load_requests_total{{{sel}}}[$__rate_interval]))", "{{outcome}}"),
    ], "2xx/3xx/4xx/5xx, rpc_ok/rpc_error, and client-side failures (connect, read, write, timeout).",
        stack=True))
    d = d.with_row(row(ids, "Latency"))
    pct = []
    for q in ("0.5", "0.9", "0.99"):
        for kind in ("corrected", "uncorrected"):
            pct.append((f"histogram_quantile({q}, sum by (scenario, le) "
                        f"(rate(perfkit_load_{kind}_latency_seconds_bucket{{{sel}}}[$__rate_interval])))",
                        f"{{{{scenario}}}} p{float(q) * 100:g} {kind}"))
    d = d.with_panel(ts(ids, "Corrected vs uncorrected percentiles", "s", pct,
                        "Corrected latency runs from the intended send time of the constant-rate schedule; "
                        "uncorrected from the actual send. A stall shows in the corrected series only "
                        "(coordinated omission)."))
    d = d.with_panel(ts(ids, "Error ratio", "percentunit", [
        (f"target_scenario:perfkit_load_errors:ratio_rate1m{{{sel}}}", "{{scenario}}"),
    ], "Responses that are not 2xx/3xx/rpc_ok, and failures, over all requests."))
    d = d.with_panel(hm(ids, "Corrected latency heatmap",
                        f"sum by (le) (rate(perfkit_load_corrected_latency_seconds_bucket{{{sel}}}[$__rate_interval]))",
                        "Responses per corrected-latency bucket over time."))
    d = d.with_panel(ts(ids, "Client p99 (corrected) vs server p99", "s", [
        (f"max by (service) (target_scenario:perfkit_load_corrected_latency_seconds:p99_rate1m{{{sel}}})",
         "{{service}} client, corrected"),
        (f"service:http_server_request_duration_seconds:p99_rate1m and on (service) "
         f"group by (service) (perfkit_load_target_rate{{{sel}}})", "{{service}} server"),
    ], "The targeted service's own p99 (server side) next to the load engine's corrected p99."))
    return d


def http_client() -> dashboard.Dashboard:
    ids = _Ids()
    sel = 'service=~"$service",host=~"$host",method=~"$method"'
    ssel = 'service=~"$service"'
    req = "http_client_request_duration_seconds"
    stage = "http_client_stage_duration_seconds"
    d = _dashboard("perfmono-http-client", "perfmono: HTTP clients",
                   "Outgoing HTTP requests of any service instrumented with the kit's client histograms: rate by "
                   "status class, latency per host, and where the time goes (pool wait, connect, TLS, time to "
                   "first byte, transfer, decode).")
    d = d.with_variable(_query_variable("service", "Service", f"label_values({req}_count, service)"))
    d = d.with_variable(_query_variable("host", "Host", f'label_values({req}_count{{{ssel}}}, host)'))
    d = d.with_variable(_query_variable("method", "Method",
                                        f'label_values({req}_count{{{ssel},host=~"$host"}}, method)'))
    d = d.with_row(row(ids, "Requests"))
    d = d.with_panel(ts(ids, "Requests by status class", "reqps", [
        (f"sum by (status_class) (rate({req}_count{{{sel}}}[$__rate_interval]))", "{{status_class}}"),
    ], "Requests/s by the class of the answer; `error` is no answer at all (refused, reset, timed out).",
        stack=True))
    d = d.with_panel(ts(ids, "Failed requests", "percentunit", [
        (f'(sum(rate({req}_count{{{sel},status_class=~"5xx|error"}}[$__rate_interval])) '
         f"or 0 * sum(rate({req}_count{{{sel}}}[$__rate_interval]))) "
         f"/ sum(rate({req}_count{{{sel}}}[$__rate_interval]))", "5xx or no answer"),
    ], "Share of requests answered 5xx or not answered (status class `error`)."))
    d = d.with_panel(ts(ids, "Latency by host: p50 / p99", "s", p50_p99(req, "host", sel),
                        "Client-side request duration per host (host:port), from the request's start to its body "
                        "read, interpolated from the buckets (25 µs … 10 s)."))
    d = d.with_panel(ts(ids, "Request rate by host and method", "reqps", [
        (f"sum by (host, method) (rate({req}_count{{{sel}}}[$__rate_interval]))", "{{host}} {{method}}"),
    ], "Requests/s per host and method."))
    d = d.with_panel(hm(ids, "Request latency heatmap",
                        f"sum by (le) (rate({req}_bucket{{{sel}}}[$__rate_interval]))",
                        "Requests per latency bucket over time (the selected services, hosts and methods), "
                        "straight from the buckets.", width=24))
    d = d.with_row(row(ids, "Stages (per service: the stage histogram has no host or method)"))
    d = d.with_panel(ts(ids, "Stage time per request", "s", [
        (f"sum by (service, stage) (rate({stage}_sum{{{ssel}}}[$__rate_interval])) / on (service) group_left () "
         f"sum by (service) (rate({req}_count{{{ssel}}}[$__rate_interval]))", "{{service}} {{stage}}"),
    ], "Time spent in each stage per request, averaged over all requests (a stage that few requests go through, "
       "such as connect with a warm pool, weighs little): stacked, about the mean request duration.",
        stack=True))
    d = d.with_panel(ts(ids, "Stage p99", "s", [
        (f"histogram_quantile(0.99, sum by (stage, le) (rate({stage}_bucket{{{ssel}}}[$__rate_interval])))",
         "{{stage}}"),
    ], "p99 of each stage over the times it ran (pool_wait, connect, tls, ttfb, transfer, decode)."))
    d = d.with_panel(ts(ids, "Stages/s", "ops", [
        (f"sum by (stage) (rate({stage}_count{{{ssel}}}[$__rate_interval]))", "{{stage}}"),
    ], "How often each stage ran: connect and tls at the rate of new connections (pool misses), the others "
       "about once per request.", width=24))
    return d


def all_dashboards() -> dict[str, dashboard.Dashboard]:
    out = {"overview": overview(), "load-run": load_run(), "http-client": http_client()}
    for s in SERVICES:
        out[s.name.replace("_", "-")] = service_dashboard(s)
    return out


def to_current_schema(model: dict) -> dict:
    """Bring the SDK's output to the dashboard schema of current Grafana (checked by //dashboards:schema_test).

    The SDK still writes fields that schema no longer has: the dashboard's `style` (theme), a placeholder `id` and the interval-variable settings
    `auto`, `auto_count`, `auto_min` on every variable, and a heatmap tooltip switched by `show` (now a `mode`).
    """
    model.pop("style", None)
    for var in model.get("templating", {}).get("list", []):
        var.pop("id", None)
        if var.get("type") != "interval":
            for key in ("auto", "auto_count", "auto_min"):
                var.pop(key, None)
    for panel in model.get("panels", []):
        tooltip = panel.get("options", {}).get("tooltip") if panel.get("type") == "heatmap" else None
        if tooltip is not None and "show" in tooltip:
            tooltip["mode"] = "single" if tooltip.pop("show") else "none"
    return model


def render(d: dashboard.Dashboard) -> str:
    model = to_current_schema(json.loads(json.dumps(d.build(), cls=JSONEncoder)))
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def rendered() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {f"{name}.json": render(d) for name, d in sorted(all_dashboards().items())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=DEFAULT_OUT, help="directory of the JSON files (default: %(default)s)")
    p.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    a = p.parse_args(argv)
    files = rendered()
    if a.check:
        bad = []
        have = {f for f in os.listdir(a.out) if f.endswith(".json")} if os.path.isdir(a.out) else set()
        for name in sorted(have | set(files)):
            path = os.path.join(a.out, name)
            if name not in files:
                bad.append(f"{name}: not generated any more (delete it)")
            elif name not in have:
                bad.append(f"{name}: missing")
            else:
                with open(path, encoding="utf-8") as f:
                    if f.read() != files[name]:
                        bad.append(f"{name}: differs")
        for b in bad:
            print(b, file=sys.stderr)
        if bad:
            print("run dashboards/grafana/generate.py to regenerate", file=sys.stderr)
            return 1
        return 0
    os.makedirs(a.out, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(a.out, name), "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {len(files)} dashboards to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
