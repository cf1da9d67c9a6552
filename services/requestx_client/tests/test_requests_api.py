"""The parts of the requests API beyond the request functions: codes, the exception hierarchy, Request and
PreparedRequest, Session.prepare_request/send/merge_environment_settings, adapters and mount(), hooks on
every redirect hop."""

from __future__ import annotations

import io
import json
import pickle
import warnings
from collections import OrderedDict

import pytest

import requestx_client as requests
from requestx_client import exceptions as exc
from requestx_client.adapters import BaseAdapter, HTTPAdapter
from requestx_client.models import PreparedRequest, Request
from requestx_client.status_codes import codes
from requestx_client.structures import CaseInsensitiveDict, LookupDict


# --- codes ---

def test_codes_by_attribute_and_item():
    assert requests.codes is codes
    assert codes.ok == codes.OK == codes["ok"] == codes.get("okay") == codes.all_good == 200
    assert codes["not_found"] == codes.NOT_FOUND == 404
    assert codes.teapot == codes.im_a_teapot == codes.I_AM_A_TEAPOT == 418
    assert codes.moved == 301 and codes.see_other == 303 and codes.temporary_redirect == 307
    assert codes.permanent_redirect == codes.resume == 308
    assert codes.internal_server_error == codes.server_error == 500 and codes["/o\\"] == 500
    assert codes["\\o/"] == codes["✓"] == 200
    assert codes.too_many_requests == 429 and codes.unavailable == 503
    assert codes.precondition == 428  # a name given to two codes belongs to the later one
    assert codes.uri_too_long == 414
    assert codes["no_such_status"] is None and codes.get("no_such_status", 0) == 0
    with pytest.raises(AttributeError):
        codes.no_such_status  # noqa: B018  (attribute access fails as for any object, as in requests)
    assert repr(codes) == "<lookup 'status_codes'>"


def test_lookup_dict():
    d = LookupDict("things")
    d.a = 1
    assert d["a"] == 1 and d.a == 1 and d["b"] is None and d.get("b", 2) == 2
    assert len(d) == 0 and "a" not in d  # the names live in attributes, the dict stays empty (as in requests)
    assert d.name == "things" and repr(d) == "<lookup 'things'>"


# --- exceptions ---

@pytest.mark.parametrize("cls, bases", [
    (exc.RequestException, (IOError, OSError)),
    (exc.HTTPError, (exc.RequestException,)),
    (exc.ConnectionError, (exc.RequestException,)),
    (exc.ProxyError, (exc.ConnectionError,)),
    (exc.SSLError, (exc.ConnectionError,)),
    (exc.Timeout, (exc.RequestException,)),
    (exc.ConnectTimeout, (exc.ConnectionError, exc.Timeout)),
    (exc.ReadTimeout, (exc.Timeout,)),
    (exc.URLRequired, (exc.RequestException,)),
    (exc.TooManyRedirects, (exc.RequestException,)),
    (exc.MissingSchema, (exc.RequestException, ValueError)),
    (exc.InvalidSchema, (exc.RequestException, ValueError)),
    (exc.InvalidURL, (exc.RequestException, ValueError)),
    (exc.InvalidHeader, (exc.RequestException, ValueError)),
    (exc.InvalidProxyURL, (exc.InvalidURL,)),
    (exc.InvalidJSONError, (exc.RequestException,)),
    (exc.JSONDecodeError, (exc.InvalidJSONError, json.JSONDecodeError, ValueError)),
    (exc.ChunkedEncodingError, (exc.RequestException,)),
    (exc.ContentDecodingError, (exc.RequestException,)),
    (exc.StreamConsumedError, (exc.RequestException, TypeError)),
    (exc.RetryError, (exc.RequestException,)),
    (exc.UnrewindableBodyError, (exc.RequestException,)),
    (exc.RequestsWarning, (Warning,)),
    (exc.FileModeWarning, (exc.RequestsWarning, DeprecationWarning)),
    (exc.RequestsDependencyWarning, (exc.RequestsWarning,)),
])
def test_exception_hierarchy(cls, bases):
    for base in bases:
        assert issubclass(cls, base), (cls, base)
    assert getattr(requests.exceptions, cls.__name__) is cls


def test_exception_request_and_response():
    e = exc.RequestException("boom")
    assert e.request is None and e.response is None and str(e) == "boom"

    class R:
        request = "the request"

    e = exc.HTTPError("bad", response=R())
    assert e.request == "the request" and isinstance(e.response, R)
    e = exc.ConnectionError("x", request="mine", response=R())
    assert e.request == "mine"


def test_json_decode_error_carries_msg_doc_pos():
    e = exc.JSONDecodeError("Expecting value", "{bad", 1)
    assert (e.msg, e.doc, e.pos, e.lineno, e.colno) == ("Expecting value", "{bad", 1, 1, 2)
    assert str(e) == "Expecting value: line 1 column 2 (char 1)"
    assert e.request is None and e.response is None
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is exc.JSONDecodeError and (back.msg, back.doc, back.pos) == ("Expecting value", "{bad", 1)
    with pytest.raises(ValueError):
        raise e


def test_warnings_are_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("text mode", requests.FileModeWarning)
    assert caught and issubclass(caught[0].category, requests.RequestsWarning)


# --- Request and PreparedRequest ---

def test_request_prepare():
    req = Request("post", "http://example.org/p", headers={"X-A": "1"}, params={"q": "a b"}, json={"k": [1, 2]},
                  auth=("u", "p"), cookies={"c": "v"})
    assert repr(req) == "<Request [post]>"
    p = req.prepare()
    assert isinstance(p, PreparedRequest) and repr(p) == "<PreparedRequest [POST]>"
    assert p.method == "POST" and p.url == "http://example.org/p?q=a+b" and p.path_url == "/p?q=a+b"
    assert isinstance(p.headers, CaseInsensitiveDict)
    assert p.headers["x-a"] == "1" and p.headers["Content-Type"] == "application/json"
    assert p.body == b'{"k":[1,2]}' and p.headers["Content-Length"] == str(len(p.body))
    assert p.headers["Authorization"] == "Basic dTpw" and p.headers["Cookie"] == "c=v"
    assert p.hooks == {"response": []}


def test_prepared_request_bodies_and_lengths():
    p = Request("POST", "http://h/", data={"a": "1", "b": ["x", "y"]}).prepare()
    # as in requests: form data is a str, a str or bytes given stays as it is (its length in UTF-8)
    assert p.body == "a=1&b=x&b=y" and p.headers["Content-Type"] == "application/x-www-form-urlencoded"
    p = Request("POST", "http://h/", data="héllo", headers={"Content-Type": "text/plain"}).prepare()
    assert p.body == "héllo" and p.headers["Content-Type"] == "text/plain" and p.headers["Content-Length"] == "6"
    p = Request("POST", "http://h/", files={"f": ("a.txt", b"abc", "text/plain")}, data={"k": "v"}).prepare()
    assert p.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert b'name="f"; filename="a.txt"' in p.body and b"abc" in p.body
    assert p.headers["Content-Length"] == str(len(p.body))
    p = Request("POST", "http://h/").prepare()
    assert p.body is None and p.headers["Content-Length"] == "0"
    p = Request("GET", "http://h/").prepare()
    assert p.body is None and "Content-Length" not in p.headers
    big = 2 ** 70  # orjson refuses integers beyond 64 bits: json serialises them
    assert Request("POST", "http://h/", json={"n": big}).prepare().body == b'{"n":%d}' % big


def test_prepared_request_step_by_step_and_copy():
    p = PreparedRequest()
    p.prepare_method(b"patch")
    p.prepare_url("http://h/a b/é", {"x": "1"})
    p.prepare_headers({"X-One": "1"})
    p.prepare_cookies({"k": "v"})
    p.prepare_body(None, None, {"a": 1})
    p.prepare_auth(requests.HTTPBearerAuth("t"))
    seen = []
    p.prepare_hooks({"response": seen.append})
    assert p.method == "PATCH" and p.url == "http://h/a%20b/%C3%A9?x=1" and p.path_url == "/a%20b/%C3%A9?x=1"
    assert p.headers["Cookie"] == "k=v" and p.headers["Authorization"] == "Bearer t"
    assert p.hooks["response"] == [seen.append]
    c = p.copy()
    c.headers["X-One"] = "changed"
    assert p.headers["X-One"] == "1" and c.body == p.body and c.url == p.url and c.method == p.method
    assert p.deregister_hook("response", seen.append) and not p.deregister_hook("response", seen.append)
    with pytest.raises(ValueError):
        p.register_hook("request", print)


def test_prepare_url_checks():
    with pytest.raises(exc.MissingSchema):
        Request("GET", "example.org/x").prepare()
    with pytest.raises(exc.InvalidURL):
        Request("GET", "HTTP://").prepare()
    with pytest.raises(exc.URLRequired):
        Request("GET", None).prepare()
    # another scheme is left as it is, for an adapter mounted for it
    assert Request("GET", "ftp://h/f").prepare().url == "ftp://h/f"
    # credentials in the URL become Basic auth; the URL keeps them, as in requests (the adapter does not send them)
    p = Request("GET", "http://u:p%40ss@h:8080/x").prepare()
    assert p.url == "http://u:p%40ss@h:8080/x"
    assert p.headers["Authorization"] == requests.HTTPBasicAuth("u", "p@ss")._value
    # a non-ASCII host in IDNA 2008; hosts requests refuses
    assert Request("GET", "http://straße.de/straße").prepare().url == "http://xn--strae-oqa.de/stra%C3%9Fe"
    for bad in ("http://*.example.org/", "http://.example.org/", "http://☃.net/", "http://h:abc/"):
        with pytest.raises(exc.InvalidURL):
            Request("GET", bad).prepare()
    # escapes of unreserved characters are decoded, other escapes kept, unsafe characters encoded
    assert Request("GET", "http://h/a%7E%2F b").prepare().url == "http://h/a~%2F%20b"


def test_prepared_streams_and_rewind():
    gen = (c for c in [b"a", b"b"])
    p = Request("POST", "http://h/", data=gen).prepare()
    assert p.body is gen and p.headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in p.headers
    f = io.BytesIO(b"the data")
    f.read(4)
    p = Request("POST", "http://h/", data=f).prepare()
    assert p.body is f and p._body_position == 4 and p.headers["Content-Length"] == "4"
    assert f.read() == b"data"
    requests.utils.rewind_body(p)
    assert f.read() == b"data"
    p = Request("POST", "http://h/", data=iter([b"x"])).prepare()
    with pytest.raises(exc.UnrewindableBodyError):
        requests.utils.rewind_body(p)
    with pytest.raises(exc.InvalidJSONError):
        Request("POST", "http://h/", json={"n": float("nan")}).prepare()
    assert Request("POST", "http://h/", json={"n": None}).prepare().body == b'{"n":null}'


def test_prepared_header_checks():
    for bad in ({"X": " leading"}, {" X": "v"}, {"X": "a\r\nb"}, {"X": 3}):
        with pytest.raises(exc.InvalidHeader):
            Request("GET", "http://h/", headers=bad).prepare()
    p = Request("GET", "http://h/", headers={b"X-B": b"v", "X-None": None}).prepare()
    assert list(p.headers.items()) == [("X-B", b"v")]
    with requests.Session() as s:
        s.headers["Accept-Encoding"] = None  # a session header set to None is not sent
        assert "Accept-Encoding" not in s.prepare_request(Request("GET", "http://h/")).headers
        del s.headers["Accept-Encoding"]
        s.headers["X-Bad"] = "\tvalue"
        with pytest.raises(exc.InvalidHeader):
            s.prepare_request(Request("GET", "http://h/"))


def test_send_a_prepared_request(server):
    p = Request("PUT", server.url + "/echo", data=b"body", headers={"X-T": "1"}).prepare()
    with requests.Session() as s:
        r = s.send(p)
    j = r.json()
    assert j["method"] == "PUT" and j["body"] == "body" and j["headers"]["X-T"] == "1"
    assert r.request is p
    with pytest.raises(ValueError):
        requests.Session().send(Request("GET", server.url))


# --- Session: prepare_request, merge_environment_settings, send ---

def test_prepare_request_merges_session_settings(server):
    with requests.Session(headers={"X-S": "s", "X-Drop": "d"}, params={"sp": "1"}, auth=("su", "sp")) as s:
        s.cookies.set("sc", "1")
        hook = lambda r, **kw: None  # noqa: E731
        s.hooks["response"].append(hook)
        p = s.prepare_request(Request("get", server.url + "/echo", headers={"X-R": "r", "X-Drop": None},
                                      params={"rp": "2"}, cookies={"rc": "2"}))
        assert p.method == "GET" and p.url == server.url + "/echo?sp=1&rp=2"
        assert p.headers["X-S"] == "s" and p.headers["X-R"] == "r" and "X-Drop" not in p.headers
        assert p.headers["User-Agent"].startswith("python-requestx-client/")
        assert p.headers["Authorization"] == requests.HTTPBasicAuth("su", "sp")._value
        assert p.headers["Cookie"] in ("sc=1; rc=2", "rc=2; sc=1")
        assert p.hooks["response"] == [hook]
        own = lambda r, **kw: None  # noqa: E731
        p = s.prepare_request(Request("GET", server.url, hooks={"response": own}, auth=("ru", "rp")))
        assert p.hooks["response"] == [own]  # the request's hooks replace the session's
        assert p.headers["Authorization"] == requests.HTTPBasicAuth("ru", "rp")._value
        assert "sc=1" == p.headers["Cookie"] and s.cookies.get_dict() == {"sc": "1"}


def test_merge_environment_settings(monkeypatch, tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    s = requests.Session(proxies={"http": "http://p:1"})
    got = s.merge_environment_settings("https://h/", {"https": "http://q:2"}, None, None, None)
    assert got == {"proxies": {"http": "http://p:1", "https": "http://q:2"}, "stream": False,
                   "verify": str(bundle), "cert": None}
    got = s.merge_environment_settings("https://h/", None, True, False, None)
    assert got["verify"] is False and got["stream"] is True and got["proxies"] == {"http": "http://p:1"}
    s = requests.Session(trust_env=False)
    assert s.merge_environment_settings("https://h/", None, None, None, None)["verify"] is True


def test_environment_replaced_by_a_mapping(monkeypatch, tmp_path):
    # a program (or requests' own tests) may put a plain dict in os.environ's place: it is what counts
    netrc = tmp_path / "netrc"
    netrc.write_text("machine h login u password p\n")
    fake = {"REQUESTS_CA_BUNDLE": "/some/path", "HTTPS_PROXY": "http://proxy:3", "NETRC": str(netrc)}
    monkeypatch.setattr("os.environ", fake)
    s = requests.Session()
    got = s.merge_environment_settings("https://h/", {}, None, True, None)
    assert got["verify"] == "/some/path" and got["proxies"] == {"https": "http://proxy:3"}
    assert requests.utils.get_netrc_auth("https://h/") == ("u", "p")
    fake.clear()
    assert s.merge_environment_settings("https://h/", {}, None, True, None)["verify"] is True


_PREPARED = ("method", "url", "body", "hooks", "_cookies", "_own_cookies", "_body_position")


@pytest.mark.parametrize("method, url, data, json", [
    ("get", "http://h/", None, None),
    ("POST", "https://h:8443/a/b?x=1&y=2", None, {"k": [1, 2]}),
    ("PUT", "http://127.0.0.1/", b"raw bytes", None),
    ("PATCH", "http://[::1]:80/p", {"form": "v", "n": ["1", "2"]}, None),
    ("DELETE", "http://h/", "text body", {"ignored": True}),
    ("POST", "http://h/", iter([b"a", b"b"]), None),
    ("HEAD", "http://h/", None, None),
])
def test_plain_preparation_equals_the_general_one(method, url, data, json):
    s = requests.Session(headers={"X-Session": "1", "Accept": None})
    plain = s.prepare_plain(method, url, data, json)
    general = s.prepare_request(Request(method, url, data=data, json=json))
    assert plain is not None
    for name in _PREPARED:
        a, b = getattr(plain, name), getattr(general, name)
        assert a == b or (name == "body" and a is data is b), name
    assert list(plain.headers.items()) == list(general.headers.items())


def test_plain_preparation_steps_aside_when_the_session_adds_more(server, tmp_path, monkeypatch):
    url = server.url + "/get"
    assert requests.Session().prepare_plain("GET", url, None, None) is not None
    for change in (lambda s: setattr(s, "auth", ("u", "p")), lambda s: s.params.update(q="1"),
                   lambda s: s.hooks["response"].append(lambda r, **kw: r),
                   lambda s: s.cookies.set("c", "1")):
        s = requests.Session()
        change(s)
        assert s.prepare_plain("GET", url, None, None) is None
        r = s.get(url)  # the general way still applies it
        assert r.status_code == 200
    for odd in ("HTTP://h/", "http://u:p@h/", "http://h", "http://h/%7E", b"http://h/"):
        assert requests.Session().prepare_plain("GET", odd, None, None) is None
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login nu password np\n")
    monkeypatch.setenv("NETRC", str(netrc))
    s = requests.Session()
    assert s.prepare_plain("GET", url, None, None) is None
    assert s.get(server.url + "/echo").json()["headers"]["Authorization"].startswith("Basic ")

    class Own(requests.Session):
        def prepare_request(self, request):
            p = super().prepare_request(request)
            p.headers["X-Own"] = "1"
            return p
    assert Own().prepare_plain("GET", url, None, None) is None
    assert Own().get(server.url + "/echo").json()["headers"]["X-Own"] == "1"


@pytest.mark.parametrize("step", ["prepare_request", "merge_environment_settings", "send", "get_adapter"])
@pytest.mark.parametrize("where", ["class", "object"])
def test_a_patched_step_sees_plain_requests(server, monkeypatch, step, where):
    # plain requests skip steps with nothing to do, but never one that was replaced
    calls = []
    original = getattr(requests.Session, step)

    def spy(self, *args, **kwargs):
        calls.append(step)
        return original(self, *args, **kwargs)
    s = requests.Session()
    if where == "class":
        monkeypatch.setattr(requests.Session, step, spy)
    else:
        monkeypatch.setattr(s, step, spy.__get__(s))
    assert s.get(server.url + "/echo").json()["method"] == "GET"
    assert s.post(server.url + "/echo", json={"a": 1}).json()["body"] == '{"a":1}'
    assert calls == [step, step]


def test_plain_requests_keep_cookies_redirects_and_environment(server, monkeypatch):
    s = requests.Session()
    r = s.get(server.url + "/cookies/set?flavour=oat")
    assert [h.status_code for h in r.history] == [302] and r.json() == {"cookie": "flavour=oat"}
    assert s.cookies.get_dict() == {"flavour": "oat"}
    r = requests.Session().get(server.url + "/redirect/1", allow_redirects=False)
    assert r.status_code == 302 and r.next.url == server.url + "/echo"
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # a port nothing listens on
    with pytest.raises(exc.ProxyError):
        requests.Session().get(server.url + "/echo")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert requests.Session().get(server.url + "/echo").ok


def test_request_goes_through_prepare_request_and_send(server):
    calls = []

    class Tracing(requests.Session):
        def prepare_request(self, request):
            calls.append(("prepare_request", request.method))
            return super().prepare_request(request)

        def merge_environment_settings(self, url, proxies, stream, verify, cert):
            calls.append(("merge_environment_settings", url))
            return super().merge_environment_settings(url, proxies, stream, verify, cert)

        def send(self, request, **kwargs):
            calls.append(("send", sorted(kwargs)))
            return super().send(request, **kwargs)

    with Tracing() as s:
        assert s.get(server.url + "/echo").ok
    assert calls == [("prepare_request", "GET"), ("merge_environment_settings", server.url + "/echo"),
                     ("send", ["allow_redirects", "cert", "proxies", "stream", "timeout", "verify"])]


def test_hooks_run_on_every_redirect_hop(server):
    seen = []

    def hook(r, **kwargs):
        seen.append((r.status_code, sorted(kwargs)))

    r = requests.get(server.url + "/redirect/3", hooks={"response": hook})
    assert r.ok and [s for s, _ in seen] == [302, 302, 302, 200]
    assert seen[0][1] == ["cert", "proxies", "stream", "timeout", "verify"]
    with requests.Session() as s:
        s.hooks["response"].append(lambda r, **kw: seen.append(r.url))
        seen.clear()
        s.get(server.url + "/redirect/1")
        assert seen == [server.url + "/redirect/1", server.url + "/echo"]


def test_a_hook_can_replace_the_response(server):
    with requests.Session() as s:
        def elsewhere(r, **kwargs):
            if r.status_code != 404:
                return None
            p = r.request.copy()
            p.url = server.url + "/echo"
            return s.send(p, **kwargs)

        r = s.get(server.url + "/status/404", hooks={"response": elsewhere})
        assert r.status_code == 200 and r.json()["path"] == "/echo"


def test_next_of_an_unfollowed_redirect(server):
    r = requests.get(server.url + "/redirect/2", allow_redirects=False)
    assert r.status_code == 302 and isinstance(r.next, PreparedRequest)
    assert r.next.url == server.url + "/redirect/1" and r.next.method == "GET"
    assert requests.get(server.url + "/echo").next is None


# --- adapters ---

def test_session_adapters_and_mount(server):
    s = requests.Session()
    assert isinstance(s.adapters, OrderedDict) and list(s.adapters) == ["https://", "http://"]
    a = s.get_adapter(server.url)
    assert isinstance(a, HTTPAdapter) and s.get_adapter("HTTPS://x/") is a
    assert a.max_retries == 0 and a._pool_maxsize == 32
    special = HTTPAdapter(pool_connections=2, pool_maxsize=4, max_retries=3)
    s.mount(server.url + "/echo", special)
    s.mount("http://127.0.0.1", a)
    assert list(s.adapters)[0] == server.url + "/echo"  # longest prefix first
    assert [len(k) for k in s.adapters] == sorted((len(k) for k in s.adapters), reverse=True)
    assert s.get_adapter(server.url + "/echo?x") is special and s.get_adapter(server.url + "/other") is a
    r = s.get(server.url + "/echo")
    assert r.ok and r.connection is special
    with pytest.raises(exc.InvalidSchema):
        s.get_adapter("ftp://h/")
    with pytest.raises(exc.InvalidSchema):
        s.get("ftp://127.0.0.1/x")
    s.close()
    assert s.get(server.url + "/echo").ok  # adapters reopen connections after close()


def test_custom_adapters(server):
    sent = []

    class Recording(HTTPAdapter):
        def send(self, request, **kwargs):
            sent.append((request.method, request.url, kwargs["timeout"]))
            request.headers["X-Adapter"] = "recording"
            return super().send(request, **kwargs)

    class Canned(BaseAdapter):
        def __init__(self):
            self.inner = HTTPAdapter()
            self.closed = False

        def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
            request.url = server.url + "/echo?canned=1"
            return self.inner.send(request, stream=stream, timeout=timeout, verify=verify, proxies=proxies)

        def close(self):
            self.closed = True

    with requests.Session() as s:
        s.mount("http://", Recording())
        canned = Canned()
        s.mount("mock://", canned)
        r = s.get(server.url + "/echo", timeout=5)
        assert r.json()["headers"]["X-Adapter"] == "recording"
        assert sent == [("GET", server.url + "/echo", 5)]
        r = s.get("mock://anything/")
        assert r.json()["args"] == [["canned", "1"]]
    assert canned.closed


def test_adapter_settings_and_close(server):
    a = HTTPAdapter(pool_maxsize=2, max_retries=1)
    r = a.send(Request("GET", server.url + "/echo").prepare(), timeout=(5, 5))
    assert r.ok and r.connection is a and r.json()["method"] == "GET"
    a.close()
    assert a.send(Request("GET", server.url + "/echo").prepare()).ok
    with pytest.raises(OSError):
        a.send(Request("GET", server.url).prepare(), cert="c.pem")  # a missing file, as requests checks


def test_retries_on_connection_errors(refused_url):
    a = HTTPAdapter(max_retries=2)
    with pytest.raises(exc.ConnectionError):
        a.send(Request("GET", refused_url).prepare(), timeout=2)


def test_clone_shares_adapter_pools(server):
    s = requests.Session()
    c = s.clone()
    assert c.get_adapter(server.url) is not s.get_adapter(server.url)
    assert c.get(server.url + "/echo").ok and s._native.pool_count() == 1
    c.close()  # the clone's close leaves the original's pools alone
    assert s._native.pool_count() == 1


# --- Response() without the core, r.raw, pickling ---

def test_an_empty_response_reads_its_raw():
    import io

    r = requests.Response()
    assert (r.status_code, r.url, r.reason, r.raw, r.encoding, r.history) == (None, None, None, None, None, [])
    assert r.headers == {} and len(r.cookies) == 0 and r.elapsed.total_seconds() == 0
    assert r.content is None  # no raw, no body
    r = requests.Response()
    r.raw = io.BytesIO(b'{"a": [1, 2]}\nsecond line')
    r.status_code = 200
    assert list(r.iter_lines()) == [b'{"a": [1, 2]}', b"second line"]
    r = requests.Response()
    r.raw = io.BytesIO(b"abcdef")
    assert list(r.iter_content(4)) == [b"abcd", b"ef"]
    with pytest.raises(RuntimeError):
        r.content  # noqa: B018  (streamed out already, as in requests)


@pytest.mark.parametrize("reason, shown", [(b"Caf\xc3\xa9 ferm\xc3\xa9", "Café fermé"), (b"Caf\xe9", "Café")])
def test_raise_for_status_decodes_a_bytes_reason(reason, shown):
    r = requests.Response()
    r.status_code, r.reason, r.url = 503, reason, "http://x/"
    with pytest.raises(exc.HTTPError, match=f"503 Server Error: {shown} for url: http://x/"):
        r.raise_for_status()


def test_raw_of_a_streamed_response(server):
    with requests.get(server.url + "/big?size=100000", stream=True) as r:
        first = r.raw.read(10)
        rest = b"".join(r.raw.stream(4096))
        assert len(first) == 10 and len(first + rest) == 100000 and r.raw.read(1) == b""


def test_response_and_session_pickle(server):
    s = requests.Session()
    s.headers["X-Kept"] = "1"
    s.cookies.set("c", "v")
    r = s.get(server.url + "/echo?x=1")
    back = pickle.loads(pickle.dumps(r))
    assert back.status_code == 200 and back.json()["args"] == [["x", "1"]] and back.url == r.url
    s2 = pickle.loads(pickle.dumps(s))
    echoed = s2.get(server.url + "/echo").json()["headers"]
    assert echoed["X-Kept"] == "1" and echoed["Cookie"] == "c=v"


# --- redirects through send(), as requests' SessionRedirectMixin ---

def test_each_redirect_hop_goes_through_send(server):
    from urllib.parse import urlsplit

    class Recording(requests.Session):
        def __init__(self):
            super().__init__()
            self.sent = []

        def send(self, request, **kwargs):
            self.sent.append((urlsplit(request.url).path, kwargs.get("allow_redirects", True)))
            return super().send(request, **kwargs)

    s = Recording()
    r = s.get(server.url + "/redirect/2")
    assert r.json()["path"] == "/echo" and len(r.history) == 2
    assert s.sent == [("/redirect/2", True), ("/redirect/1", False), ("/echo", False)]


def test_rebuild_auth_can_be_overridden(server):
    other = server.url.replace("127.0.0.1", "localhost")  # another host: Authorization is dropped
    url = server.url + "/redirect-to?url=" + other + "/echo"
    assert "Authorization" not in requests.get(url, auth=("u", "p")).json()["headers"]

    class KeepAuth(requests.Session):
        def rebuild_auth(self, prepared_request, response):
            pass  # trust every host this session is sent to

    assert KeepAuth().get(url, auth=("u", "p")).json()["headers"]["Authorization"].startswith("Basic ")


def test_resolve_redirects_by_hand(server):
    s = requests.Session()
    r = s.get(server.url + "/redirect/3", allow_redirects=False)
    assert r.is_redirect and r.next.url.endswith("/redirect/2")
    hops = list(s.resolve_redirects(r, r.request))
    assert [h.status_code for h in hops] == [302, 302, 200] and hops[-1].history[0] is r


# --- urllib3 Retry and Timeout objects ---

def test_urllib3_retry_on_status():
    from servers import RawServer
    from urllib3.util import Retry

    answer = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nfail"
    with RawServer(lambda c, r, h: answer) as srv:
        s = requests.Session()
        s.mount("http://", HTTPAdapter(max_retries=Retry(total=2, status_forcelist=[500])))
        with pytest.raises(exc.RetryError):
            s.get(srv.url + "/")
        assert len(srv.requests) == 3  # the request and two retries
        s.mount("http://", HTTPAdapter(max_retries=Retry(total=1, status_forcelist=[500], raise_on_status=False)))
        assert s.get(srv.url + "/").status_code == 500 and len(srv.requests) == 5
        # POST is not in urllib3's default allowed methods: not sent again
        s.mount("http://", HTTPAdapter(max_retries=Retry(total=3, status_forcelist=[500])))
        assert s.post(srv.url + "/", data=b"x").status_code == 500 and len(srv.requests) == 6


def test_urllib3_timeout_objects(server):
    from urllib3.util import Timeout

    assert requests.get(server.url + "/echo", timeout=Timeout(connect=None, read=None)).ok
    with pytest.raises(exc.ReadTimeout) as e:
        requests.get(server.url + "/slow-headers?delay=2", timeout=Timeout(connect=1, read=0.1))
    assert "Read timed out" in str(e.value.args[0])
    with pytest.raises(ValueError, match="must be an int, float or None"):
        requests.get(server.url + "/echo", timeout="soon")
