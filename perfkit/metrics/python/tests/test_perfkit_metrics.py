"""The Python package: recording, flushing, negotiation, multi-process aggregation, threads, the ASGI endpoint."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from perfkit_metrics import Registry, host_label, method_label, status_class


def samples(body: bytes) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}


def count(body: bytes, name: str, **labels) -> float:
    return samples(body)[(name, tuple(sorted(labels.items())))]


def test_a_scrape_sees_what_was_recorded_since_the_last_flush():
    reg = Registry()
    server = reg.http_server("svc")
    server.observe("/a", "GET", 200, 0.001)
    body, ctype = reg.exposition()
    assert ctype.startswith("text/plain; version=0.0.4")
    assert count(body, "http_server_request_duration_seconds_count", service="svc", route="/a", method="GET",
                 status_class="2xx") == 1
    server.observe("/a", "GET", 201, 0.001)
    assert count(reg.exposition()[0], "http_server_request_duration_seconds_count", service="svc", route="/a",
                 method="GET", status_class="2xx") == 2


def test_openmetrics_when_the_scraper_asks():
    reg = Registry()
    reg.counter("jobs_total", "Jobs", ["kind"]).inc(("a",))
    body, ctype = reg.exposition("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
    assert ctype.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n") and b"# TYPE jobs counter" in body and b"_created" not in body


def test_a_family_asked_for_twice_is_shared_and_a_clash_is_refused():
    reg = Registry()
    a, b = reg.http_server("one"), reg.http_server("two")
    a.observe("/", "GET", 200, 0.1)
    b.observe("/", "GET", 200, 0.1)
    body = reg.exposition()[0]
    for service in ("one", "two"):
        assert count(body, "http_server_request_duration_seconds_count", service=service, route="/", method="GET",
                     status_class="2xx") == 1
    with pytest.raises(ValueError, match="another kind or label set"):
        reg.gauge("http_server_request_duration_seconds", "clash")


def test_hot_paths_are_sampled_one_in_n():
    reg = Registry()
    hot = reg.hotpaths("svc", sample_every=8)
    assert sum(hot.sampled() for _ in range(64)) == 8
    with pytest.raises(ValueError, match="power of two"):
        reg.hotpaths("svc", sample_every=6)


def test_client_recording_from_many_threads_loses_nothing():
    reg = Registry()
    client = reg.http_client("cli")
    reg.start_thread(period=0.001)  # flushes race with the recording threads

    def work():
        for _ in range(5000):
            client.observe("GET", "h:80", 200, 0.0001)
            client.stage("connect", 0.0001)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reg.stop_thread()
    body = reg.exposition()[0]
    assert count(body, "http_client_request_duration_seconds_count", service="cli", method="GET", host="h:80",
                 status_class="2xx") == 20000
    assert count(body, "http_client_stage_duration_seconds_count", service="cli", stage="connect") == 20000


def test_labels():
    assert [method_label(m) for m in ("GET", "get", "BREW")] == ["GET", "OTHER", "OTHER"]
    assert [status_class(s) for s in (0, 99, 100, 404, 599, 600)] == ["error", "other", "1xx", "4xx", "5xx", "other"]
    assert host_label("https://example.org/x") == "example.org:443"
    assert host_label("http://[::1]:8080/") == "[::1]:8080"
    assert host_label("http://h") == "h:80"


def test_the_asgi_endpoint_negotiates():
    reg = Registry()
    reg.http_server("svc").observe("/", "GET", 200, 0.01)
    sent = []

    async def send(msg):
        sent.append(msg)

    scope = {"type": "http", "headers": [(b"accept", b"application/openmetrics-text; version=1.0.0")]}
    asyncio.run(reg.asgi_app()(scope, None, send))
    assert sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"content-type"].startswith(b"application/openmetrics-text")
    assert b'service="svc"' in sent[1]["body"]


WORKER = """
import sys
from perfkit_metrics import Registry
reg = Registry()
server = reg.http_server("svc")
for _ in range(int(sys.argv[1])):
    server.observe("/", "GET", 200, 0.002)
reg.flush()
"""


def test_workers_add_up_in_multiprocess_mode(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    for n in (3, 4):
        subprocess.run([sys.executable, "-c", WORKER, str(n)], env=env, check=True, timeout=60)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
    try:
        body = Registry().exposition()[0]
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    assert count(body, "http_server_request_duration_seconds_count", service="svc", route="/", method="GET",
                 status_class="2xx") == 7


def test_a_request_and_its_stages_recorded_at_once():
    reg = Registry()
    client = reg.http_client("cli")
    client.observe_request("GET", "h:443", 200, 0.02, (0.000001, 0.001, 0.004, 0.01, 0.002, None))
    client.observe_request("GET", "h:443", 0, 0.5, None)
    body = reg.exposition()[0]
    assert count(body, "http_client_request_duration_seconds_count", service="cli", method="GET", host="h:443",
                 status_class="2xx") == 1
    assert count(body, "http_client_request_duration_seconds_count", service="cli", method="GET", host="h:443",
                 status_class="error") == 1
    assert count(body, "http_client_stage_duration_seconds_sum", service="cli", stage="tls") == 0.004
    assert ("http_client_stage_duration_seconds_count", (("service", "cli"), ("stage", "decode"))) not in samples(body)


def test_a_resolved_child_records_into_its_series_across_flushes():
    reg = Registry()
    family = reg.histogram("job_seconds", "Jobs", ["queue"])
    fast = family.child(("fast",))
    fast.observe(0.001)
    body = reg.exposition()[0]
    assert count(body, "job_seconds_count", queue="fast") == 1
    fast.observe(0.002)
    fast.observe(20.0)
    family.observe(("fast",), 0.003)  # the same series by key
    body = reg.exposition()[0]
    assert count(body, "job_seconds_count", queue="fast") == 4
    assert count(body, "job_seconds_bucket", queue="fast", le="10.0") == 3
    assert abs(count(body, "job_seconds_sum", queue="fast") - 20.006) < 1e-9
