"""The requests-compatible API surface against a real local server."""

from __future__ import annotations

import asyncio
import datetime
import io

import pytest

import requestx_client as requests
from requestx_client import exceptions as exc


def test_methods(server):
    with requests.Session() as s:
        for name in ("get", "post", "put", "patch", "delete", "options"):
            r = getattr(s, name)(server.url + "/echo")
            assert r.status_code == 200 and r.ok
            assert r.json()["method"] == name.upper()
        r = s.head(server.url + "/echo")
        assert r.status_code == 200 and r.content == b""
        assert int(r.headers["content-length"]) > 0
        r = s.request("PURGE", server.url + "/echo")
        assert r.status_code == 501  # http.server has no do_PURGE


def test_module_level_functions(server):
    assert requests.get(server.url + "/echo").json()["method"] == "GET"
    assert requests.post(server.url + "/echo", data=b"x").json()["body"] == "x"
    assert requests.request("DELETE", server.url + "/echo").json()["method"] == "DELETE"


def test_response_attributes(server):
    r = requests.get(server.url + "/status/404")
    assert r.status_code == 404 and r.reason == "Not Found" and not r.ok and not r
    assert r.url == server.url + "/status/404"
    assert isinstance(r.elapsed, datetime.timedelta)
    assert r.request.method == "GET" and r.request.url == r.url
    assert r.text == "status body"
    assert repr(r) == "<Response [404]>"
    with pytest.raises(exc.HTTPError) as e:
        r.raise_for_status()
    assert "404 Client Error: Not Found" in str(e.value) and e.value.response is r
    with pytest.raises(exc.HTTPError, match="503 Server Error"):
        requests.get(server.url + "/status/503").raise_for_status()
    requests.get(server.url + "/status/204").raise_for_status()


def test_params(server):
    r = requests.get(server.url + "/echo?a=1", params={"b": "x y", "c": ["1", "2"], "d": None})
    assert r.json()["args"] == [["a", "1"], ["b", "x y"], ["c", "1"], ["c", "2"]]
    assert r.url.endswith("/echo?a=1&b=x+y&c=1&c=2")
    r = requests.get(server.url + "/echo", params=[("k", "v"), ("k", "w")])
    assert r.json()["args"] == [["k", "v"], ["k", "w"]]
    with requests.Session(params={"s": "1"}) as s:
        assert s.get(server.url + "/echo", params={"r": "2"}).json()["args"] == [["s", "1"], ["r", "2"]]


def test_data_forms_and_bytes(server):
    r = requests.post(server.url + "/echo", data={"a": "1", "b": ["x", "y"]})
    j = r.json()
    assert j["body"] == "a=1&b=x&b=y"
    assert j["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    r = requests.put(server.url + "/echo", data="héllo")
    assert r.json()["body"].encode("latin-1").decode("utf-8") == "héllo"
    big = bytes(range(256)) * 1000  # large bodies are handed to the core without a copy
    r = requests.post(server.url + "/echo", data=big)
    assert r.json()["body"].encode("latin-1") == big
    r = requests.post(server.url + "/echo", data=io.BytesIO(b"from a file"))
    assert r.json()["body"] == "from a file"
    r = requests.post(server.url + "/echo", data=(c for c in [b"gen", "erator"]))
    assert r.json()["body"] == "generator"
    r = requests.post(server.url + "/echo")
    assert r.json()["headers"]["Content-Length"] == "0"


def test_json_body(server):
    payload = {"name": "x", "list": [1, 2.5, None, True], "nested": {"é": "ü"}}
    r = requests.post(server.url + "/echo", json=payload)
    j = r.json()
    assert j["headers"]["Content-Type"] == "application/json"
    import json
    assert json.loads(j["body"].encode("latin-1")) == payload
    r = requests.post(server.url + "/echo", json=payload, headers={"Content-Type": "application/vnd+json"})
    assert r.json()["headers"]["Content-Type"] == "application/vnd+json"
    with pytest.raises(exc.InvalidJSONError):
        requests.post(server.url + "/echo", json={"x": object()})


def test_files_multipart(server):
    files = {
        "f1": ("report.csv", b"a,b\n1,2\n", "text/csv"),
        "f2": io.BytesIO(b"binary\x00data"),
        "f3": ("x.txt", "text content"),
    }
    r = requests.post(server.url + "/echo", files=files, data={"field": "value"})
    j = r.json()
    ctype = j["headers"]["Content-Type"]
    assert ctype.startswith("multipart/form-data; boundary=")
    import email.parser
    msg = email.parser.BytesParser().parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + j["body"].encode("latin-1"))
    parts = {p.get_param("name", header="content-disposition"): p for p in msg.get_payload()}
    assert parts["field"].get_payload(decode=True) == b"value"
    assert parts["f1"].get_filename() == "report.csv"
    assert parts["f1"].get_content_type() == "text/csv"
    assert parts["f1"].get_payload(decode=True) == b"a,b\n1,2\n"
    assert parts["f2"].get_payload(decode=True) == b"binary\x00data"
    assert parts["f3"].get_payload(decode=True) == b"text content"


def test_headers_case_insensitive(server):
    r = requests.get(server.url + "/headers-multi", headers={"X-Custom": "1", "user-agent": "ua/1"})
    assert r.headers["x-multi"] == "a, b"
    assert r.headers["X-CASE"] == "Yes" and "X-Case" in r.headers
    assert r.headers.get("missing") is None
    with requests.Session(headers={"X-Session": "s"}) as s:
        j = s.get(server.url + "/echo", headers={"X-Req": "r"}).json()
        assert j["headers"]["X-Session"] == "s" and j["headers"]["X-Req"] == "r"
        j = s.get(server.url + "/echo", headers={"x-session": None}).json()
        assert "X-Session" not in j["headers"]
        assert j["headers"]["User-Agent"].startswith("python-requestx-client/")
        s.headers["X-Session"] = "changed"
        assert s.get(server.url + "/echo").json()["headers"]["X-Session"] == "changed"


def test_basic_and_bearer_auth(server):
    assert requests.get(server.url + "/basic-auth/u/p", auth=("u", "p")).json() == {"authenticated": True}
    assert requests.get(server.url + "/basic-auth/u/p", auth=("u", "wrong")).status_code == 401
    assert requests.get(server.url + "/basic-auth/u/p", auth=requests.HTTPBasicAuth("u", "p")).ok
    url = server.url.replace("http://", "http://u:p@") + "/basic-auth/u/p"
    assert requests.get(url).ok
    with requests.Session(auth=requests.HTTPBearerAuth("tok123")) as s:
        assert s.get(server.url + "/bearer").json() == {"token": "tok123"}


def test_cookies_persist_in_session(server):
    with requests.Session() as s:
        r = s.get(server.url + "/cookies/set?a=1&b=2")
        assert r.json()["cookie"] in ("a=1; b=2", "b=2; a=1")
        assert [h.status_code for h in r.history] == [302]
        assert r.history[0].cookies.get_dict() == {"a": "1", "b": "2"}
        assert s.cookies["a"] == "1" and s.cookies.get_dict() == {"a": "1", "b": "2"}
        assert s.get(server.url + "/cookies", cookies={"c": "3"}).json()["cookie"] == "a=1; b=2; c=3"
        s.get(server.url + "/cookies/delete?a=x")
        assert s.get(server.url + "/cookies").json()["cookie"] == "b=2"
    # module-level calls keep no cookies between calls
    requests.get(server.url + "/cookies/set?z=9")
    assert requests.get(server.url + "/cookies").json()["cookie"] is None


def test_redirects_and_history(server):
    r = requests.get(server.url + "/redirect/3")
    assert r.status_code == 200 and r.url == server.url + "/echo"
    assert [h.status_code for h in r.history] == [302, 302, 302]
    assert r.history[0].url == server.url + "/redirect/3"
    r = requests.get(server.url + "/redirect/3", allow_redirects=False)
    assert r.status_code == 302 and r.is_redirect and r.headers["Location"] == "/redirect/2"
    # 303 turns POST into GET and drops the body; 307 keeps both
    r = requests.post(server.url + "/redirect-to?status=303&url=/echo", data=b"payload")
    assert r.json()["method"] == "GET" and r.json()["body"] == ""
    r = requests.post(server.url + "/redirect-to?status=307&url=/echo", data=b"payload")
    assert r.json()["method"] == "POST" and r.json()["body"] == "payload"
    with requests.Session(max_redirects=2) as s:
        with pytest.raises(exc.TooManyRedirects):
            s.get(server.url + "/redirect/3")
        assert s.get(server.url + "/redirect/2").ok


def test_authorization_dropped_on_host_change(server):
    target = server.localhost_url + "/echo"
    r = requests.get(server.url + "/redirect-to?url=" + target, headers={"Authorization": "secret"})
    assert r.url == target and "Authorization" not in r.json()["headers"]


@pytest.mark.parametrize("enc", ["gzip", "deflate", "br", "zstd"])
def test_content_decoding(server, enc):
    r = requests.get(server.url + "/" + enc)
    assert r.json() == {"encoding": enc, "data": "abc" * 1000}


def test_charsets(server):
    assert requests.get(server.url + "/text/utf-8").text == "héllo wörld"
    r = requests.get(server.url + "/text/iso-8859-1")
    assert r.encoding == "iso-8859-1" and r.text == "héllo wörld"
    r = requests.get(server.url + "/text/utf-16")
    assert r.text == "héllo wörld"
    r = requests.get(server.url + "/text/none")  # text/* without charset: ISO-8859-1 as requests does
    assert r.encoding == "ISO-8859-1" and r.text == "hÃ©llo wÃ¶rld"
    r.encoding = "utf-8"
    assert r.text == "héllo wörld"


def test_streaming_iter_content_and_lines(server):
    with requests.Session() as s:
        r = s.get(server.url + "/big?size=300000", stream=True)
        sizes = [len(c) for c in r.iter_content(chunk_size=65536)]
        assert sum(sizes) == 300000 and max(sizes) <= 65536
        with pytest.raises(exc.StreamConsumedError):
            r.content
        r = s.get(server.url + "/chunked-lines", stream=True)
        assert list(r.iter_lines()) == [b"line one", b"line two", b"line three", b"last"]
        r = s.get(server.url + "/chunked-lines", stream=True)
        assert list(r.iter_lines(decode_unicode=True)) == ["line one", "line two", "line three", "last"]
        r = s.get(server.url + "/chunked-lines", stream=True)
        assert "".join(r.iter_content(chunk_size=None, decode_unicode=True)) == \
            "line one\nline two\nline three\nlast"
        r = s.get(server.url + "/big?size=1000")  # iter_content on an already read body
        assert b"".join(r.iter_content(100)) == b"x" * 1000
        with s.get(server.url + "/big?size=100000", stream=True) as r:
            assert len(r.content) == 100000


def test_timeouts_and_verify_settings_validated(server):
    with pytest.raises(ValueError):
        requests.get(server.url + "/echo", timeout=(1, 2, 3, 4))
    with pytest.raises(ValueError):
        requests.get(server.url + "/echo", timeout="soon")
    with pytest.raises(ValueError):
        requests.get(server.url + "/echo", timeout=-1)
    assert requests.get(server.url + "/echo", timeout=5).ok
    assert requests.get(server.url + "/echo", timeout=(5, 5, 10)).ok


def test_https_with_test_ca(tls_server, ca_file):
    r = requests.get(tls_server.url + "/echo", verify=ca_file)
    assert r.ok and r.json()["method"] == "GET"
    assert requests.get(tls_server.localhost_url + "/echo", verify=ca_file).ok
    with requests.Session(verify=ca_file) as s:
        assert s.post(tls_server.url + "/echo", json={"a": 1}).json()["body"] == '{"a":1}'
    assert requests.get(tls_server.url + "/echo", verify=False).ok


def test_session_clone_shares_pool(server):
    s = requests.Session()
    c = s.clone()
    s.headers["X-A"] = "1"
    assert "X-A" not in c.headers
    assert c.get(server.url + "/echo").ok and s.get(server.url + "/echo").ok
    assert s._native.pool_count() == c._native.pool_count() == 1


def test_hooks(server):
    seen = []
    r = requests.get(server.url + "/echo", hooks={"response": [lambda r, **kw: seen.append(r.status_code)]})
    assert r.ok and seen == [200]


def test_json_of_large_body(server):
    r = requests.get(server.url + "/json-big?n=20000")
    data = r.json()
    assert len(data) == 20000 and data[123] == {"id": 123, "name": "item123", "ok": True}
    assert list(data[0].keys()) == ["id", "name", "ok"]  # key order kept


def test_json_of_large_body_leaves_the_garbage_collector_as_it_was(server):
    """The collector is paused while a large body's objects are built, and left as the caller had it:
    enabled, disabled, and after a large body that is not JSON."""
    import gc

    big = requests.get(server.url + "/json-big?n=5000")
    assert gc.isenabled()
    assert len(big.json()) == 5000 and gc.isenabled()
    gc.disable()
    try:
        assert len(big.json()) == 5000 and not gc.isenabled()
    finally:
        gc.enable()
    bad = requests.get(server.url + "/big?size=100000")  # 100 KB of "x": large, not JSON
    assert len(bad.content) > 64 * 1024
    with pytest.raises(requests.JSONDecodeError):
        bad.json()
    assert gc.isenabled()


def test_proxy_from_arguments(server):
    # the test server answers absolute-form requests, i.e. acts as the forward proxy
    r = requests.get("http://proxied.invalid/echo?x=1", proxies={"http": server.url})
    j = r.json()
    assert j["path"] == "/echo" and j["args"] == [["x", "1"]] and j["headers"]["Host"] == "proxied.invalid"


def test_proxy_from_environment(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with requests.Session() as s:
        assert s.get("http://env-proxied.invalid/echo").json()["headers"]["Host"] == "env-proxied.invalid"
    with requests.Session(trust_env=False) as s:
        with pytest.raises(exc.ConnectionError):
            s.get("http://env-proxied.invalid/echo", timeout=5)


def test_session_close_then_reuse(server):
    s = requests.Session()
    assert s.get(server.url + "/echo").ok and s._native.pool_count() == 1
    s.close()
    assert s._native.pool_count() == 0
    assert s.get(server.url + "/echo").ok  # reopens on demand, as requests does


def test_body_limits_over_https(tls_server, ca_file):
    """The reqwest path (https) honours Session(max_body_size=, max_decoded_size=) as the direct path does."""
    with requests.Session(max_decoded_size=1000, verify=ca_file) as s:
        with pytest.raises(requests.exceptions.ContentDecodingError):
            s.get(tls_server.url + "/gzip")  # ~3 KB once decoded
    with requests.Session(max_body_size=100_000, verify=ca_file) as s:
        with pytest.raises(requests.exceptions.RequestException) as e:
            s.get(tls_server.url + "/big?size=200000")
        assert "larger than the limit of 100000 bytes" in str(e.value)
        assert len(s.get(tls_server.url + "/big?size=50000").content) == 50000
    with requests.Session(verify=ca_file) as s:  # no limit by default
        assert s.get(tls_server.url + "/gzip").json()["encoding"] == "gzip"


def test_client_certificate(ca, ca_file, tmp_path):
    """cert= (one PEM file with the key, or a (cert, key) pair) against a server that requires one."""
    import ssl

    from servers import Server

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ca.configure_trust(ctx)
    client = ca.issue_cert("client.example")
    both, cert, key = (tmp_path / n for n in ("both.pem", "cert.pem", "key.pem"))
    client.private_key_and_cert_chain_pem.write_to_path(str(both))
    client.cert_chain_pems[0].write_to_path(str(cert))
    client.private_key_pem.write_to_path(str(key))
    with Server(ctx) as srv:
        with pytest.raises(requests.exceptions.ConnectionError):  # no certificate: the server refuses
            requests.get(srv.url + "/echo", verify=ca_file)
        assert requests.get(srv.url + "/echo", verify=ca_file, cert=str(both)).json()["method"] == "GET"
        with requests.Session() as s:
            s.cert = (cert, key)  # path-like objects too
            assert s.get(srv.url + "/echo", verify=ca_file).ok

        async def with_async_client():
            async with requests.AsyncClient(verify=ca_file) as c:
                return (await c.get(srv.url + "/echo", cert=str(both))).status_code

        assert asyncio.run(with_async_client()) == 200
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(srv.url + "/echo", verify=ca_file, cert=str(bad))
