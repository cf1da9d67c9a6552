"""Proxies as requests chooses them: the ``proxies`` mapping (``scheme://host`` before ``scheme`` before
``all``), the environment's ``*_proxy`` variables read at every request (set after the session was
made, they still apply) and ``no_proxy`` (suffixes, host:port, CIDR, ``*``); Proxy-Authorization on
``rebuild_proxies``; malformed proxy URLs; and real proxies: pproxy as a SOCKS5 server and as an HTTP
CONNECT proxy in front of a TLS server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import requestx_client as requests
from requestx_client import _proxies
from requestx_client import exceptions as exc

_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_a_variable_set_after_the_session_was_made_applies(server, monkeypatch):
    with requests.Session() as s:
        assert s.get(server.url + "/echo").json()["headers"]["Host"].startswith("127.0.0.1")
        # the test server answers absolute-form requests, so it can act as the forward proxy
        monkeypatch.setenv("http_proxy", server.url)
        assert s.get("http://late.invalid/echo").json()["headers"]["Host"] == "late.invalid"
        monkeypatch.delenv("http_proxy")
        with pytest.raises(exc.ConnectionError):
            s.get("http://late.invalid/echo", timeout=5)


def test_lower_case_variables_win(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    monkeypatch.setenv("http_proxy", server.url)
    assert requests.get("http://lower.invalid/echo").json()["headers"]["Host"] == "lower.invalid"


@pytest.mark.parametrize("no_proxy, url, bypass", [
    ("example.com", "http://example.com/", True),
    ("example.com", "http://www.example.com/", True),
    (".example.com", "http://www.example.com/", True),
    ("example.com", "http://notexample.com/", False),
    ("example.com:8080", "http://example.com:8080/", True),
    ("example.com:8080", "http://example.com:9090/", False),
    ("10.0.0.0/8", "http://10.1.2.3/", True),
    ("10.0.0.0/8", "http://11.1.2.3/", False),
    ("192.168.0.7", "http://192.168.0.7:81/", True),
    ("*", "http://anything.example/", True),
    ("a.test, b.test", "http://x.b.test/", True),
    ("", "http://example.com/", False),
])
def test_no_proxy_entries(no_proxy, url, bypass):
    assert _proxies.should_bypass_proxies(url, no_proxy) is bypass


def test_no_proxy_sends_direct(server, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:1")  # nothing listens: used, it would fail
    with pytest.raises(exc.ProxyError):
        requests.get(server.url + "/echo")
    # no_proxy of the call, then of the environment
    assert requests.get(server.url + "/echo", proxies={"no_proxy": "127.0.0.1"}).ok
    monkeypatch.setenv("no_proxy", "127.0.0.0/8")
    assert requests.get(server.url + "/echo").ok


def test_the_most_specific_key_is_chosen():
    proxies = {"all": "http://all:1", "http": "http://scheme:1", "http://a.test": "http://host:1",
               "all://b.test": "http://allhost:1"}
    assert _proxies.select_proxy("http://a.test/x", proxies) == "http://host:1"
    assert _proxies.select_proxy("http://c.test/x", proxies) == "http://scheme:1"
    assert _proxies.select_proxy("https://b.test/x", proxies) == "http://allhost:1"
    assert _proxies.select_proxy("https://c.test/x", proxies) == "http://all:1"
    assert _proxies.select_proxy("https://c.test/x", {"http": "http://p:1"}) is None


def test_per_host_proxy_key_is_used(server):
    proxies = {"http://keyed.invalid": server.url, "http": "http://127.0.0.1:1"}
    assert requests.get("http://keyed.invalid/echo", proxies=proxies).json()["headers"]["Host"] == "keyed.invalid"


@pytest.mark.parametrize("proxy", ["http:/badproxyurl:3128", "http://:8080", "https://", "http:///example.com:8080"])
def test_a_proxy_url_without_a_host_is_refused(server, proxy):
    with pytest.raises(exc.InvalidProxyURL):
        requests.get(server.url + "/echo", proxies={"http": proxy})


def test_a_proxy_without_a_scheme_is_http(server):
    host_port = server.url.split("://", 1)[1]
    r = requests.get("http://noscheme.invalid/echo", proxies={"http": host_port})
    assert r.json()["headers"]["Host"] == "noscheme.invalid"


def test_rebuild_proxies_sets_proxy_authorization_for_plain_http_only(monkeypatch):
    s = requests.Session()
    proxies = {"http": "http://user:pa%20ss@proxy.test:3128", "https": "http://user:pass@proxy.test:3129"}
    plain = requests.Request("GET", "http://example.com/", headers={"Proxy-Authorization": "stale"}).prepare()
    assert s.rebuild_proxies(plain, proxies)["http"] == proxies["http"]
    assert plain.headers["Proxy-Authorization"] == requests.auth._basic_auth_str("user", "pa ss")
    tunnelled = requests.Request("GET", "https://example.com/", headers={"Proxy-Authorization": "x"}).prepare()
    s.rebuild_proxies(tunnelled, proxies)
    assert "Proxy-Authorization" not in tunnelled.headers
    monkeypatch.setenv("https_proxy", "http://env.test:1")
    assert s.rebuild_proxies(requests.Request("GET", "https://a.test/").prepare(), {})["https"] == "http://env.test:1"
    s.trust_env = False
    assert s.rebuild_proxies(requests.Request("GET", "https://a.test/").prepare(), {}) == {}


def test_proxy_headers_of_the_adapter():
    adapter = requests.HTTPAdapter()
    assert adapter.proxy_headers("http://user:pass@proxy.test") == {"Proxy-Authorization": "Basic dXNlcjpwYXNz"}
    assert adapter.proxy_headers("http://proxy.test") == {}


# --- real proxies (pproxy) ---

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pproxy():
    """pproxy listening as SOCKS5 and as an HTTP proxy (with CONNECT) on two ports."""
    socks_port, http_port = _free_port(), _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pproxy", "-l", f"socks5://127.0.0.1:{socks_port}",
                             "-l", f"http://127.0.0.1:{http_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    for port in (socks_port, http_port):
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail("pproxy did not start: %s" % proc.stderr.read().decode(errors="replace")[-2000:])
                time.sleep(0.05)
    yield f"socks5://127.0.0.1:{socks_port}", f"socks5h://127.0.0.1:{socks_port}", f"http://127.0.0.1:{http_port}"
    proc.kill()
    proc.wait()


def test_through_a_socks5_proxy(server, pproxy):
    socks5, socks5h, _ = pproxy
    r = requests.get(server.url + "/echo?via=socks5", proxies={"http": socks5})
    assert r.status_code == 200 and r.json()["args"] == [["via", "socks5"]]
    # socks5h: the proxy resolves the name
    port = server.url.rsplit(":", 1)[1]
    r = requests.get(f"http://localhost:{port}/echo", proxies={"http": socks5h})
    assert r.json()["headers"]["Host"] == f"localhost:{port}"


def test_socks5_from_the_environment(server, pproxy, monkeypatch):
    monkeypatch.setenv("all_proxy", pproxy[0])
    with requests.Session() as s:
        assert s.get(server.url + "/echo").json()["path"] == "/echo"


def test_a_streamed_upload_through_a_proxy(server, pproxy):
    _, _, http_proxy = pproxy
    pieces = (bytes([i]) * 100_000 for i in range(20))
    r = requests.post(server.url + "/upload-digest", data=pieces, proxies={"http": http_proxy})
    assert r.json()["size"] == 2_000_000 and r.json()["framing"] == "chunked"


def test_https_through_an_http_connect_proxy(tls_server, ca_file, pproxy):
    _, _, http_proxy = pproxy
    r = requests.get(tls_server.url + "/echo", proxies={"https": http_proxy}, verify=ca_file)
    assert r.status_code == 200 and r.json()["path"] == "/echo"
    # the tunnel carries TLS end to end: a certificate nobody trusts is still refused
    with pytest.raises(exc.SSLError):
        requests.get(tls_server.url + "/echo", proxies={"https": http_proxy})


def test_a_socks_proxy_that_hangs_up_is_a_proxy_error(server):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        hang_up = threading.Thread(target=lambda: srv.accept()[0].close(), daemon=True)
        hang_up.start()
        url = "socks5h://127.0.0.1:%d" % srv.getsockname()[1]
        with pytest.raises(exc.ProxyError):
            requests.get(server.url + "/echo", proxies={"http": url}, timeout=5)
        hang_up.join(5)
