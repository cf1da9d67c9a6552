"""Bad input and faults: each must raise the exact requests exception type, promptly, never crash or hang."""

from __future__ import annotations

import time

import pytest

import requestx_client as requests
from requestx_client import exceptions as exc


@pytest.mark.parametrize("url, kind", [
    ("example.com/path", exc.MissingSchema),
    ("/relative/only", exc.MissingSchema),
    ("ftp://127.0.0.1/file", exc.InvalidSchema),
    ("file:///etc/hosts", exc.InvalidSchema),
    ("ws://127.0.0.1/", exc.InvalidSchema),
    ("http://", exc.InvalidURL),
    ("http://[::1/", exc.InvalidURL),
    ("http://host:99999/", exc.InvalidURL),
    ("http://exa mple.com/", exc.InvalidURL),
])
def test_invalid_urls(url, kind):
    with pytest.raises(kind) as e:
        requests.get(url)
    assert isinstance(e.value, exc.RequestException) and isinstance(e.value, ValueError)


def test_url_required():
    with pytest.raises(exc.URLRequired):
        requests.get(None)


def test_invalid_headers(server):
    with pytest.raises(exc.InvalidHeader):
        requests.get(server.url + "/echo", headers={"X-Bad": "line\r\nInjected: yes"})
    with pytest.raises(exc.InvalidHeader):
        requests.get(server.url + "/echo", headers={"Bad Name": "v"})
    with pytest.raises(exc.InvalidHeader):
        requests.get(server.url + "/echo", headers={"X-Num": 5})


def test_invalid_method(server):
    with pytest.raises(ValueError):
        requests.request("GE T", server.url + "/echo")


def _fastest(kind, fn, tries=3):
    """Seconds taken by the quickest of a few calls that must each raise `kind` (scheduling noise on
    a loaded machine only ever adds time; the timeout itself must hold every time)."""
    best = None
    for _ in range(tries):
        t0 = time.monotonic()
        with pytest.raises(kind) as e:
            fn()
        took = time.monotonic() - t0
        best = took if best is None else min(best, took)
        last = e.value
        if best < 0.25:
            break
    return best, last


def test_connection_refused(refused_url):
    t0 = time.monotonic()
    with pytest.raises(exc.ConnectionError) as e:
        requests.get(refused_url, timeout=5)
    assert type(e.value) is exc.ConnectionError
    assert e.value.request.url == refused_url and e.value.request.method == "GET"
    assert time.monotonic() - t0 < 1


def test_dns_failure():
    with pytest.raises(exc.ConnectionError) as e:
        requests.get("http://no-such-host.invalid/", timeout=10)
    assert type(e.value) is exc.ConnectionError


# stream=True takes the reqwest path (one pool for every timeout: the timeouts travel with the request)
@pytest.mark.parametrize("stream", [False, True])
def test_connect_timeout_honoured(blackhole_url, stream):
    took, err = _fastest(exc.ConnectTimeout, lambda: requests.get(blackhole_url, timeout=(0.2, 5), stream=stream))
    assert 0.2 <= took < 0.25, took
    assert isinstance(err, exc.ConnectionError) and isinstance(err, exc.Timeout)


@pytest.mark.parametrize("stream", [False, True])
def test_read_timeout_waiting_for_headers(server, stream):
    took, err = _fastest(exc.ReadTimeout,
                         lambda: requests.get(server.url + "/slow-headers?delay=1.5", timeout=(2, 0.2), stream=stream))
    assert 0.2 <= took < 0.25, took
    assert isinstance(err, exc.Timeout) and not isinstance(err, exc.ConnectionError)


def test_read_timeout_in_body(server):
    took, _ = _fastest(exc.ReadTimeout, lambda: requests.get(server.url + "/slow-body?delay=1.5", timeout=0.2))
    assert took < 0.25, took
    r = requests.get(server.url + "/slow-body?delay=1.5", timeout=0.2, stream=True)
    t0 = time.monotonic()
    with pytest.raises(exc.ReadTimeout):
        list(r.iter_content(100))
    assert time.monotonic() - t0 < 0.25


def test_total_timeout(server):
    took, _ = _fastest(exc.Timeout,
                       lambda: requests.get(server.url + "/slow-headers?delay=1.5", timeout=(1, 1, 0.15)))
    assert 0.15 <= took < 0.2, took


def test_reset_mid_body(server):
    with pytest.raises(exc.ChunkedEncodingError):
        requests.get(server.url + "/reset")
    r = requests.get(server.url + "/reset", stream=True)
    got = 0
    with pytest.raises(exc.ChunkedEncodingError):
        for chunk in r.iter_content(256):
            got += len(chunk)
    assert got == 1000
    assert requests.get(server.url + "/echo").ok  # the pool recovers


def test_redirect_loop(server):
    with pytest.raises(exc.TooManyRedirects) as e:
        requests.get(server.url + "/loop")
    assert e.value.response.status_code == 302
    assert "Exceeded 30 redirects" in str(e.value)


def test_bad_content_encoding(server):
    with pytest.raises(exc.ContentDecodingError):
        requests.get(server.url + "/bad-gzip")


def test_certificate_from_unknown_ca(untrusted_tls_server, ca_file):
    with pytest.raises(exc.SSLError) as e:
        requests.get(untrusted_tls_server.url + "/echo")
    assert isinstance(e.value, exc.ConnectionError)
    with pytest.raises(exc.SSLError):
        requests.get(untrusted_tls_server.url + "/echo", verify=ca_file)
    assert requests.get(untrusted_tls_server.url + "/echo", verify=False).json()["method"] == "GET"
    with requests.Session(verify=False) as s:
        assert s.get(untrusted_tls_server.url + "/echo").ok


def test_certificate_for_another_host(wrong_host_tls_server, ca_file):
    with pytest.raises(exc.SSLError):
        requests.get(wrong_host_tls_server.url + "/echo", verify=ca_file)
    assert requests.get(wrong_host_tls_server.url + "/echo", verify=False).ok


def test_bad_ca_bundle(tls_server, server, tmp_path):
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(OSError, match="Could not find a suitable TLS CA certificate bundle, invalid path: "):
        requests.get(tls_server.url + "/echo", verify=missing)
    assert requests.get(server.url + "/echo", verify=missing).ok  # plain http: no bundle needed
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificates here\n")
    with pytest.raises(exc.SSLError):
        requests.get(tls_server.url + "/echo", verify=str(empty))


def test_ca_bundle_removed_is_noticed(tls_server, ca_file, tmp_path, monkeypatch):
    # a bundle found once is trusted to exist for a second (no stat per request), not for longer
    clock = [1000.0]
    monkeypatch.setattr("requestx_client.adapters.monotonic", lambda: clock[0])
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(open(ca_file, "rb").read())
    with requests.Session() as s:
        assert s.get(tls_server.url + "/echo", verify=str(bundle)).ok
        bundle.unlink()
        clock[0] += 1.5
        with pytest.raises(OSError, match="invalid path: "):
            s.get(tls_server.url + "/echo", verify=str(bundle))


def test_https_to_plain_http_port(server):
    with pytest.raises(exc.SSLError):
        requests.get(server.url.replace("http://", "https://") + "/echo", timeout=2)


def test_non_utf8_text(server):
    r = requests.get(server.url + "/latin1-as-utf8")
    assert r.text == "caf\ufffd \ufffd"  # never raises, bad bytes replaced
    r = requests.get(server.url + "/text/binary")
    assert r.encoding is None and r.apparent_encoding == "windows-1252"
    assert r.text.startswith("café")


def test_invalid_json(server):
    r = requests.get(server.url + "/json-invalid")
    with pytest.raises(exc.JSONDecodeError) as e:
        r.json()
    assert isinstance(e.value, ValueError) and isinstance(e.value, exc.RequestException)
    import json
    assert isinstance(e.value, json.JSONDecodeError)
    with pytest.raises(ValueError):
        requests.get(server.url + "/text/utf-8").json()
    with pytest.raises(exc.JSONDecodeError):
        requests.get(server.url + "/status/204").json()


def test_missing_cert_file_is_an_oserror(server):
    with pytest.raises(OSError, match="Could not find the TLS certificate file"):
        requests.get(server.url + "/echo", cert="client.pem")
    with pytest.raises(OSError, match="Could not find the TLS key file"):
        requests.get(server.url + "/echo", cert=(__file__, "client.key"))


def test_bad_proxy_url(server):
    with pytest.raises(exc.InvalidURL):
        requests.get(server.url + "/echo", proxies={"http": "::not a url::"})


def test_proxy_refused(server, refused_url):
    with pytest.raises(exc.ProxyError):
        requests.get(server.url + "/echo", proxies={"http": refused_url.rstrip("/")}, timeout=2)
