"""Results documents as the bench writes them, built in memory with seeded repeat noise (compare, history)."""

import random

from perfkit import results, stats

REPEAT = 3
NOISE = 0.03  # ±3 % per repeat: what a quiet 2-core machine gives on a closed-loop probe


def _values(rng, centre, n):
    return [round(centre * (1 + rng.uniform(-NOISE, NOISE)), 3) for _ in range(n)]


def _level(rng, frac, rate, p99, held=True, cpu=20.0, n=REPEAT):
    return {
        "fraction": frac, "target_rate": rate,
        "achieved_rate": stats.summary(_values(rng, rate if held else rate * 0.8, n)),
        "held": held, "errors": 0, "engine_saturated": False,
        "cpu_per_request_us": stats.summary(_values(rng, cpu, n)),
        "latency_us": {"p50": stats.summary(_values(rng, p99 / 3, n)), "p90": stats.summary(_values(rng, p99 / 2, n)),
                       "p99": stats.summary(_values(rng, p99, n)), "p99_9": stats.summary(_values(rng, p99 * 2, n))},
        "uncorrected_latency_us": {"p50": stats.summary(_values(rng, p99 / 4, n))},
        "spectrum": [[0.5, p99 / 3], [0.99, p99]], "timeline": [],
    }


def _result(rng, max_rps, rates, *, cpu=20.0, p99=800.0, errors=0, sustainable=None, bound=False, held=True,
            n=REPEAT):
    levels = [_level(rng, f, r, p99, held=held or f < 0.9, cpu=cpu, n=n) for f, r in zip((0.5, 0.75, 0.9), rates)]
    return {
        "max_rps": stats.summary(_values(rng, max_rps, n)), "errors": errors, "requests": 100_000,
        "failures": {"5xx": errors} if errors else {}, "load_generator_bound": bound,
        "sustainable": {"rate": sustainable, "slo_p99_us": 10_000, "steps": [], "bounds": None},
        "cpu_per_request_us": levels[-1]["cpu_per_request_us"], "levels": levels, "metrics": {},
    }


def make_doc(seed=1, *, scale=1.0, cpu_scale=1.0, p99_scale=1.0, rate_scale=1.0, errors=0, version="1.0.0",
         repeat=REPEAT, connections=50, peer_bound=False, held=True, sustainable=9000.0):
    """A results document: service 'svc' and peer 'peer' on one workload; ``scale`` multiplies the service's
    throughput, ``cpu_scale`` its CPU per request, ``p99_scale`` its latency, ``rate_scale`` the shared rates."""
    rng = random.Random(seed)
    doc = results.new_document("quick", {"duration_s": 2.0, "probe_s": 2.0, "warmup_s": 1.0, "repeat": repeat,
                                         "levels": [0.5, 0.75, 0.9], "search_steps": 3},
                               {"systems": "0", "load": "1"}, {"path": "perfkit-load", "version": version}, [])
    doc["machine"].update(cpu_model="Test CPU", cpus=2)
    rates = [round(5000.0 * f * rate_scale, 1) for f in (0.5, 0.75, 0.9)]
    system = {"version": "1", "status": "ok", "error": "", "log_tail": "", "peak_rss_bytes": 1, "cpu_seconds": 1.0}
    doc["scenarios"].append({
        "name": "app", "kind": "server", "status": "ok",
        "systems": [dict(system, name="svc", role="service"), dict(system, name="peer", role="peer")],
        "workloads": [{
            "name": "json", "mode": "http", "method": "GET", "path": "/json", "connections": connections,
            "slo_p99_us": 10_000, "rates": rates, "cpu_rate": rates[-1], "rate_reference": "peer",
            "results": {
                "svc": _result(rng, 10_000 * scale, rates, cpu=20.0 * cpu_scale, p99=800.0 * p99_scale,
                               errors=errors, sustainable=sustainable * scale if sustainable else None, held=held,
                               n=repeat),
                "peer": _result(rng, 5000, rates, cpu=45.0, p99=3000.0, sustainable=4200.0, bound=peer_bound,
                                n=repeat),
            }}],
    })
    return doc
