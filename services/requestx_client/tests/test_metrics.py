"""Opt-in client metrics (perfkit_metrics): off by default with nothing timed; on, every request sent
(each redirect hop, failures as status 0) is counted under its method, host and status class, with the
stages the native core saw. Real sockets against the local test servers."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("perfkit_metrics")  # outside Bazel: perfkit/metrics/python on PYTHONPATH

from perfkit_metrics import Registry  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

import requestx_client as requests  # noqa: E402
from requestx_client import _native  # noqa: E402
from requestx_client import exceptions as exc  # noqa: E402
from perfkit_metrics import STAGES  # noqa: E402

REQ = "http_client_request_duration_seconds"
STAGE = "http_client_stage_duration_seconds"

direct_only = pytest.mark.skipif(_native.sync_io_mode() != "direct", reason="REQUESTX_CLIENT_SYNC_IO is not direct")


def _samples(registry: Registry) -> list:
    body, _ = registry.exposition()
    return [s for fam in text_string_to_metric_families(body.decode()) for s in fam.samples]


def _value(registry: Registry, sample: str, **labels) -> float:
    """Sum of the samples named `sample` whose labels include `labels`."""
    return sum(s.value for s in _samples(registry)
               if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()))


def _requests(registry: Registry, **labels) -> int:
    return int(_value(registry, REQ + "_count", **labels))


def _stage_count(registry: Registry, stage: str) -> int:
    return int(_value(registry, STAGE + "_count", stage=stage))


def _host(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0]


def _stages(resp) -> dict:
    t = resp._native.timings
    assert t is not None and len(t) == len(STAGES)
    return {name: v for name, v in zip(STAGES, t) if v is not None}


def _check_sums(registry: Registry) -> None:
    """Every stage lies inside its request: the stage sums never exceed the request durations."""
    stages = _value(registry, STAGE + "_sum")
    total = _value(registry, REQ + "_sum")
    assert 0 < stages <= total, (stages, total)


# --- off -------------------------------------------------------------------------------------------------------

def test_off_by_default_nothing_timed_nothing_recorded(server):
    registry = Registry()
    with requests.Session() as s:
        assert s.metrics is None
        for _ in range(3):
            r = s.get(server.url + "/echo")
            assert r.ok and r._native.timings is None
        assert s.get(server.url + "/gzip")._native.timings is None
        assert s.get(server.url + "/echo", stream=True)._native.timings is None  # the reqwest path
    assert requests.get(server.url + "/echo")._native.timings is None  # module-level functions
    # the native call times nothing unless asked
    assert requests.Session()._native.request("GET", server.url + "/echo").timings is None
    assert not [x for x in _samples(registry) if x.name.startswith("http_client")]


def test_turned_off_again(server):
    registry = Registry()
    with requests.Session(metrics=registry) as s:
        s.get(server.url + "/echo")
        s.metrics = None
        r = s.get(server.url + "/echo")
        assert r._native.timings is None
    assert _requests(registry) == 1


# --- counts ----------------------------------------------------------------------------------------------------

def test_counts_per_method_host_status_class(server, tls_server, ca_file, refused_url):
    registry = Registry()
    host, tls_host = _host(server.url), _host(tls_server.url)
    with requests.Session(metrics=registry, verify=ca_file) as s:
        assert s.metrics is not None and s.metrics.service == "requestx_client"
        for _ in range(3):
            s.get(server.url + "/echo")
        for _ in range(2):
            s.post(server.url + "/echo", json={"a": 1})
        s.get(server.url + "/status/404")
        s.delete(server.url + "/status/503")
        s.get(tls_server.url + "/echo")
        s.head(tls_server.url + "/echo")
        with pytest.raises(exc.ConnectionError):
            s.get(refused_url, timeout=5)
        with pytest.raises(exc.InvalidURL):  # refused before anything is sent: not a request
            s.get("http://exa mple.org:99999/")
    assert _requests(registry, method="GET", host=host, status_class="2xx") == 3
    assert _requests(registry, method="POST", host=host, status_class="2xx") == 2
    assert _requests(registry, method="GET", host=host, status_class="4xx") == 1
    assert _requests(registry, method="DELETE", host=host, status_class="5xx") == 1
    assert _requests(registry, method="GET", host=tls_host, status_class="2xx") == 1
    assert _requests(registry, method="HEAD", host=tls_host, status_class="2xx") == 1
    assert _requests(registry, method="GET", host=_host(refused_url), status_class="error") == 1
    assert _requests(registry) == 10
    assert _requests(registry, service="requestx_client") == 10
    _check_sums(registry)


def test_refused_connection_is_an_error(refused_url):
    registry = Registry()
    with requests.Session(metrics=registry) as s:
        with pytest.raises(exc.ConnectionError) as e:
            s.get(refused_url)
        # the stages seen before the failure travel with the exception: the checkout, no connection
        seen = dict(zip(STAGES, e.value._timings))
        assert seen["pool_wait"] is not None and seen["ttfb"] is None and seen["transfer"] is None
        with pytest.raises(exc.ConnectionError):  # the reqwest path
            s.get(refused_url, stream=True)
    assert _requests(registry, host=_host(refused_url), status_class="error") == 2
    assert _requests(registry) == 2
    assert _stage_count(registry, "ttfb") == 0


def test_each_redirect_hop_is_a_request(server):
    registry = Registry()
    host = _host(server.url)
    with requests.Session(metrics=registry) as s:
        r = s.get(server.url + "/redirect/2")
        assert r.ok and len(r.history) == 2
    assert _requests(registry, host=host, status_class="3xx") == 2
    assert _requests(registry, host=host, status_class="2xx") == 1
    assert _stage_count(registry, "ttfb") == 3


def test_read_timeout_is_an_error_with_its_stages(server):
    registry = Registry()
    with requests.Session(metrics=registry) as s:
        with pytest.raises(exc.ReadTimeout) as e:
            s.get(server.url + "/slow-headers?delay=1", timeout=(2, 0.1))
        seen = {k: v for k, v in zip(STAGES, e.value._timings) if v is not None}
        if _native.sync_io_mode() == "direct":
            assert set(seen) == {"pool_wait", "connect"}
        with pytest.raises(exc.ReadTimeout):
            s.get(server.url + "/slow-headers?delay=1", timeout=(2, 0.1), stream=True)
    assert _requests(registry, status_class="error") == 2
    assert _stage_count(registry, "connect") == 2
    _check_sums(registry)


# --- stages ----------------------------------------------------------------------------------------------------

@direct_only
def test_direct_path_new_connection_records_connect_reused_does_not(server):
    registry = Registry()
    with requests.Session(metrics=registry) as s:
        first = _stages(s.get(server.url + "/echo"))
        assert {"pool_wait", "connect", "ttfb", "transfer"} <= set(first)
        assert "tls" not in first and "decode" not in first
        for _ in range(4):
            again = _stages(s.get(server.url + "/echo"))
            assert set(again) == {"pool_wait", "ttfb", "transfer"}, again
    assert _requests(registry) == 5
    assert _stage_count(registry, "connect") == 1
    assert _stage_count(registry, "pool_wait") == 5
    assert _stage_count(registry, "ttfb") == 5
    assert _stage_count(registry, "transfer") == 5
    assert _stage_count(registry, "tls") == 0
    _check_sums(registry)


@pytest.mark.parametrize("path", ["direct", "reqwest"])
def test_https_new_connection_records_connect_and_tls_reused_does_not(tls_server, ca_file, path):
    if path == "direct" and _native.sync_io_mode() != "direct":
        pytest.skip("REQUESTX_CLIENT_SYNC_IO is not direct")
    registry = Registry()
    # a total timeout takes the reqwest path; there a reused connection's checkout is not seen
    total, reused = (None, {"pool_wait", "ttfb", "transfer"}) if path == "direct" else (10, {"ttfb", "transfer"})
    with requests.Session(metrics=registry, verify=ca_file, total_timeout=total) as s:
        first = _stages(s.get(tls_server.url + "/echo"))
        assert {"pool_wait", "connect", "tls", "ttfb", "transfer"} <= set(first), first
        assert first["connect"] > 0 and first["tls"] > 0
        time.sleep(0.05)  # hyper returns the connection to its pool from the runtime's thread
        again = _stages(s.get(tls_server.url + "/echo"))
        assert set(again) == reused, again
    assert _stage_count(registry, "connect") == 1
    assert _stage_count(registry, "tls") == 1
    assert _stage_count(registry, "ttfb") == 2
    _check_sums(registry)


def test_reqwest_path_plain_http_records_connect_without_tls(server):
    registry = Registry()
    with requests.Session(metrics=registry, total_timeout=10) as s:  # a total timeout takes the reqwest path
        first = _stages(s.get(server.url + "/echo"))
        assert {"pool_wait", "connect", "ttfb", "transfer"} <= set(first) and "tls" not in first, first
        time.sleep(0.05)
        again = _stages(s.get(server.url + "/echo"))
        assert set(again) == {"ttfb", "transfer"}, again
    _check_sums(registry)


def test_failed_tls_handshake_records_connect_but_not_tls(untrusted_tls_server):
    registry = Registry()
    with requests.Session(metrics=registry) as s:
        with pytest.raises(exc.SSLError) as e:
            s.get(untrusted_tls_server.url + "/echo")
    seen = {k: v for k, v in zip(STAGES, e.value._timings) if v is not None}
    assert "connect" in seen and "tls" not in seen and "ttfb" not in seen, seen
    assert _requests(registry, status_class="error") == 1


@direct_only
@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_encoded_body_records_decode(server, encoding):
    registry = Registry()
    with requests.Session(metrics=registry) as s:
        r = s.get(server.url + "/" + encoding)
        assert r.json()["encoding"] == encoding
        assert "decode" in _stages(r)
        assert "decode" not in _stages(s.get(server.url + "/echo"))
    assert _stage_count(registry, "decode") == 1
    _check_sums(registry)


def test_stage_sums_within_the_request_duration(server, tls_server, ca_file):
    registry = Registry()
    with requests.Session(metrics=registry, verify=ca_file) as s:
        for url in (server.url + "/echo", server.url + "/gzip", server.url + "/big?size=300000",
                    tls_server.url + "/gzip", tls_server.url + "/big?size=300000"):
            for _ in range(3):
                r = s.get(url)
                assert sum(_stages(r).values()) <= r.elapsed.total_seconds()
        with s.get(server.url + "/big?size=300000", stream=True) as r:  # timed up to the head
            assert "transfer" not in _stages(r)
            assert len(r.content) == 300000
    _check_sums(registry)
    assert _requests(registry) == 16


# --- module-level functions and the async client ---------------------------------------------------------------

def test_enable_metrics_for_the_module_functions(server):
    registry = Registry()
    try:
        client = requests.enable_metrics(registry, service="my_app")
        assert client.service == "my_app"
        requests.get(server.url + "/echo")
        requests.post(server.url + "/echo", data=b"x")
    finally:
        requests.enable_metrics(None)
    requests.get(server.url + "/echo")  # off again: not counted
    assert _requests(registry, service="my_app", method="GET", status_class="2xx") == 1
    assert _requests(registry, service="my_app", method="POST", status_class="2xx") == 1
    assert _requests(registry) == 2


def test_a_client_requests_object_is_used_as_given(server):
    registry = Registry()
    client = registry.http_client("svc_a")
    with requests.Session(metrics=client) as s:
        assert s.metrics is client
        s.get(server.url + "/echo")
    with pytest.raises(TypeError):
        requests.Session(metrics=object())
    assert _requests(registry, service="svc_a") == 1


def test_async_client(server, tls_server, ca_file, refused_url):
    registry = Registry()
    host = _host(server.url)

    async def scenario():
        async with requests.AsyncClient(metrics=registry, verify=ca_file) as c:
            first = await c.get(tls_server.url + "/echo")
            assert {"connect", "tls", "ttfb", "transfer"} <= set(_stages(first))
            rs = await asyncio.gather(*(c.get(server.url + "/echo") for _ in range(8)))
            assert all(r.ok for r in rs)
            r = await c.get(server.url + "/redirect/1")
            assert len(r.history) == 1
            with pytest.raises(exc.ConnectionError) as e:
                await c.get(refused_url)
            assert e.value._timings is not None
        async with requests.AsyncClient() as c:  # off
            assert (await c.get(server.url + "/echo"))._native.timings is None

    asyncio.run(scenario())
    assert _requests(registry, host=host, method="GET", status_class="2xx") == 9
    assert _requests(registry, host=host, status_class="3xx") == 1
    assert _requests(registry, host=_host(tls_server.url), status_class="2xx") == 1
    assert _requests(registry, status_class="error") == 1
    assert _requests(registry) == 12
    _check_sums(registry)
