"""A results document as a bench run writes it (fields of results v2), for the report tests: a server scenario
with three systems (a service, a peer that holds every rate, an original with failed answers, rates it did not
hold and a load-generator-bound closed-loop max) and a client scenario with three clients."""

SPECTRUM_POINTS = (0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999)
SLO_US = 10_000


def stat(*values):
    vals = [float(v) for v in values]
    vals_sorted = sorted(vals)
    mid = vals_sorted[len(vals) // 2]
    return {"median": mid, "min": min(vals), "max": max(vals), "spread": (max(vals) - min(vals)) / mid if mid else 0.0,
            "values": vals}


def spectrum(p50_us):
    # a tail that grows with the percentile, as a real corrected spectrum does
    return [[p, float(round(p50_us * (0.4 if p == 0 else 1 + 6 * (p - 0.5) ** 3 + 3 * p ** 40)))]
            for p in SPECTRUM_POINTS]


def timeline(rate, p50_us, p99_us, seconds=10, failed_at=()):
    return [{"t_s": float(t), "rate": rate * (0.98 + 0.01 * (t % 3)), "p50_us": int(p50_us * (1 + 0.05 * (t % 2))),
             "p99_us": int(p99_us * (1 + 0.3 * (t == 4))), "failed": 7 if t in failed_at else 0}
            for t in range(seconds)]


def level(frac, rate, p50_us, p99_us, held=True, achieved=None, errors=0, cpu=None, saturated=False, failed_at=()):
    got = rate if achieved is None else achieved
    return {
        "fraction": frac, "target_rate": rate, "achieved_rate": stat(got * 0.99, got, got * 1.01),
        "errors": errors, "held": held, "engine_saturated": saturated,
        "cpu_per_request_us": stat(cpu * 0.97, cpu, cpu * 1.02) if cpu else None,
        "latency_us": {"p50": stat(p50_us), "p90": stat(p50_us * 2), "p99": stat(p99_us), "p99_9": stat(p99_us * 2)},
        "uncorrected_latency_us": {"p50": stat(p50_us * 0.9), "p99": stat(p99_us * 0.8)},
        "spectrum": spectrum(p50_us),
        "timeline": timeline(got, p50_us, p99_us, failed_at=failed_at),
    }


def step(rate, achieved, p50, p99, failed=0, saturated=False):
    held = achieved >= 0.99 * rate
    return {"rate": rate, "achieved": achieved, "held": held, "p50_us": p50, "p99_us": p99, "failed": failed,
            "engine_saturated": saturated, "ok": held and p99 <= SLO_US and not failed and not saturated}


def system(name, role, rss_mib, cpu_s, status="ok", error="", log_tail=""):
    return {"name": name, "role": role, "version": "1.2.3", "status": status, "error": error, "log_tail": log_tail,
            "peak_rss_bytes": rss_mib << 20, "cpu_seconds": cpu_s}


RATES = [6000.0, 9000.0, 10800.0]


def server_scenario():
    svc = {
        "max_rps": stat(20000, 21000, 20500), "errors": 0, "failures": {}, "requests": 900000,
        "load_generator_bound": False,
        "sustainable": {"rate": 16000.0, "slo_p99_us": SLO_US, "steps": [
            step(6000, 6000, 300, 900), step(12000, 11990, 500, 2500), step(18000, 17500, 2000, 25000),
            step(16000, 15950, 900, 7000)]},
        "cpu_per_request_us": stat(41.0, 42.5, 44.0),
        "levels": [level(0.5, RATES[0], 280, 850, cpu=43.0), level(0.75, RATES[1], 320, 1200, cpu=42.0),
                   level(0.9, RATES[2], 400, 1900, cpu=42.5)],
        "metrics": {"requests": 900000, "hotpaths": {"route": {"count": 900000, "mean_us": 3.2},
                                                     "render": {"count": 900000, "mean_us": 11.5}}},
    }
    peer = {
        "max_rps": stat(15500, 16000, 16200), "errors": 0, "failures": {}, "requests": 700000,
        "load_generator_bound": False,
        "sustainable": {"rate": 12000.0, "slo_p99_us": SLO_US, "steps": [
            step(6000, 6000, 350, 1100), step(12000, 11950, 800, 6000), step(18000, 15800, 9000, 80000)]},
        "cpu_per_request_us": stat(55.0, 57.0, 60.0),
        "levels": [level(0.5, RATES[0], 330, 1000, cpu=58.0), level(0.75, RATES[1], 420, 2100, cpu=57.0),
                   level(0.9, RATES[2], 700, 4800, cpu=57.0)],
        "metrics": {},
    }
    orig = {
        "max_rps": stat(12000, 12500, 13000), "errors": 1234,
        "failures": {"timeout": 1000, "5xx": 200, "read_error": 34}, "requests": 500000, "load_generator_bound": True,
        "sustainable": {"rate": None, "slo_p99_us": SLO_US, "steps": [
            step(6000, 5990, 900, 12000, failed=40)]},
        "cpu_per_request_us": stat(80.0, 90.0, 95.0),
        "levels": [level(0.5, RATES[0], 900, 12000, errors=40, cpu=90.0),
                   level(0.75, RATES[1], 30000, 900000, held=False, achieved=8123.4, errors=600, cpu=88.0,
                         failed_at=(3, 4)),
                   level(0.9, RATES[2], 90000, 2000000, held=False, achieved=8400.0, errors=594, cpu=87.0,
                         saturated=True, failed_at=(2, 5, 6))],
        "metrics": {"requests": 500000, "hotpaths": {"route": {"count": 500000, "mean_us": 9.0}}},
    }
    return {
        "name": "webapp", "kind": "server", "status": "ok",
        "description": "the JSON endpoint of the service against a peer framework and its original",
        "systems": [system("svc", "service", 48, 31.5), system("peer-a", "peer", 60, 40.2),
                    system("orig", "original", 90, 55.0),
                    system("broken", "peer", 0, 0.0, status="failed", error="exited with status 1 before ready",
                           log_tail="Traceback (most recent call last):\nboom: cannot bind anything\n")],
        "workloads": [{
            "name": "json", "mode": "http", "method": "GET", "path": "/json", "connections": 64,
            "rates": RATES, "rate_reference": "orig", "slo_p99_us": SLO_US, "cpu_rate": RATES[0],
            "order": [["svc", "peer-a", "orig"], ["orig", "peer-a", "svc"]],
            "results": {"svc": svc, "peer-a": peer, "orig": orig},
        }],
    }


def client_scenario():
    def res(rps, errors=0):
        return {"max_rps": stat(rps * 0.98, rps, rps * 1.01), "errors": errors, "requests": int(rps * 6),
                "latency_us": {p: stat(v) for p, v in (("p50", 1e6 / rps), ("p90", 1.3e6 / rps),
                                                       ("p99", 2e6 / rps), ("p99_9", 4e6 / rps), ("max", 9e6 / rps))},
                "levels": [], "metrics": {}}
    return {
        "name": "httpclient", "kind": "client", "status": "ok", "description": "client libraries, back to back",
        "server": {"name": "hyper-floor", "status": "ok"},
        "systems": [system("myclient", "service", 30, 4.0), system("requests", "peer", 35, 5.0),
                    system("urllib3", "floor", 25, 3.0)],
        "workloads": [{"name": "ping", "mode": "http", "method": "GET", "path": "/ping", "connections": 1,
                       "rates": [], "order": [["myclient", "requests", "urllib3"]],
                       "results": {"myclient": res(4200.0), "requests": res(2100.0, errors=3),
                                   "urllib3": res(5100.0)}}],
    }


def results_document():
    return {
        "schema": "perfkit-bench/results/v1", "created": "2026-11-24T06:00:00Z", "finished": "2026-11-24T06:09:00Z",
        "suite": "quick", "interrupted": False, "git_commit": "0123abcd",
        "machine": {"hostname": "bench", "cpus": 2, "cpu_model": "Test CPU", "kernel": "6.1", "python": "3.11.7"},
        "cpu_sets": {"systems": "0", "load": "1"},
        "settings": {"duration_s": 2.0, "probe_s": 2.0, "warmup_s": 1.0, "repeat": 3, "levels": [0.5, 0.75, 0.9]},
        "load_engine": {"path": "perfkit-load", "version": "perfkit-load 0.3.0"},
        "command": ["perfkit"],
        "scenarios": [server_scenario(), client_scenario()],
    }
