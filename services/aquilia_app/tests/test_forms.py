"""Form bodies: urlencoded and multipart, streamed through python-multipart, on the real granian (RSGI
and ASGI) and in process; files spooled to disk above the threshold and released after the request;
every limit; malformed bodies are 400s, never 500s."""
import asyncio
import hashlib
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import forms_app
from aquilia_app.forms import FormData, FormLimits, UploadFile
from aquilia_app.requests import Request
from aquilia_app.testclient import TestClient
from server_util import raw_request, running_server, status_of

BOUNDARY = "b0undary"
MP = f"multipart/form-data; boundary={BOUNDARY}"
GRANIAN = {"granian-rsgi": ("--interface", "rsgi"), "granian-asgi": ("--interface", "asgi")}


def multipart(*parts, boundary: str = BOUNDARY, close: bool = True) -> bytes:
    """parts: (name, text) fields or (name, filename, content type, bytes) files."""
    out = b""
    for p in parts:
        out += f"--{boundary}\r\n".encode()
        if len(p) == 2:
            out += f'Content-Disposition: form-data; name="{p[0]}"\r\n\r\n'.encode() + p[1].encode() + b"\r\n"
        else:
            name, filename, ctype, data = p
            out += (f'Content-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                    f"Content-Type: {ctype}\r\n\r\n").encode() + data + b"\r\n"
    return out + (f"--{boundary}--\r\n".encode() if close else b"")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def call(app, method, url, **kw):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        return await c.request(method, url, **kw)


def run_call(method, url, app=None, **kw):
    return asyncio.run(call(app or forms_app.create_app(), method, url, **kw))


def assert_problem(r, status, words=()):
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    for w in words:
        assert w in r.json()["detail"], (w, r.json())


# -- on the real server ------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=list(GRANIAN))
def server(request):
    with running_server("--app", "forms_app:app", *GRANIAN[request.param]) as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
            yield port, client


def test_urlencoded_on_the_wire(server):
    _, c = server
    r = c.post("/form", content=b"a=1&b=x+y%21&a=2&empty=&caf%C3%A9=cr%C3%A8me&&flag",
               headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    assert r.json()["items"] == [["a", "1"], ["b", "x y!"], ["a", "2"], ["empty", ""], ["café", "crème"],
                                 ["flag", ""]]


def test_multipart_fields_and_files_on_the_wire(server):
    _, c = server
    blob = bytes(range(256)) * 50
    r = c.post("/form", data={"title": "héllo", "n": ["1", "2"]},
               files=[("doc", ("a.bin", blob, "application/x-thing")), ("doc", ("b.txt", b"", "text/plain"))])
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert ["title", "héllo"] in items and ["n", "1"] in items and ["n", "2"] in items
    docs = [v for k, v in items if k == "doc"]
    assert docs[0] == {"filename": "a.bin", "content_type": "application/x-thing", "size": len(blob),
                       "sha256": digest(blob), "on_disk": False}
    assert docs[1]["filename"] == "b.txt" and docs[1]["size"] == 0


def _temp_fds(c) -> int:
    return c.get("/temp-fds").json()["temp_fds"]


def test_a_big_file_is_spooled_to_disk_and_released_after_the_request(server):
    _, c = server
    before = _temp_fds(c)
    blob = b"0123456789abcdef" * (forms_app.SPOOL // 8)  # twice the spool threshold
    r = c.post("/form", files={"big": ("big.bin", blob, "application/octet-stream")})
    assert r.status_code == 200, r.text
    body = r.json()
    (item,) = body["items"]
    assert item[1]["on_disk"] is True and item[1]["size"] == len(blob) and item[1]["sha256"] == digest(blob)
    assert body["temp_fds"] == before + 1  # on disk while the handler ran
    deadline = time.monotonic() + 5
    while _temp_fds(c) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _temp_fds(c) == before  # and gone once the request ended


def test_a_streamed_upload_over_the_limit_is_413_without_buffering(server):
    port, c = server

    def chunks():
        yield multipart(("f", "f.bin", "application/octet-stream", b""))[:-len(BOUNDARY) - 8]  # an open file
        for _ in range(80):
            yield b"x" * 65536  # 5 MiB, chunked: no Content-Length to refuse up front

    head = {"content-type": MP}
    r = c.post("/form", content=chunks(), headers=head)
    assert_problem(r, 413)
    assert r.headers.get("connection") == "close"
    # a Content-Length over the limit is refused before a byte of the body is read
    raw = raw_request(port, f"POST /form HTTP/1.1\r\nHost: t\r\nContent-Type: {MP}\r\n"
                            f"Content-Length: {10 << 20}\r\n\r\n".encode() + multipart(("a", "b")))
    assert status_of(raw) == 413


@pytest.mark.parametrize("body,ctype", [
    (multipart(("a", "1")), "multipart/form-data"),  # no boundary
    (multipart(("a", "1"), close=False), MP),  # truncated: no closing boundary
    (multipart(("a", "1"))[:-30], MP),  # cut inside the part
    (b"\x00\xffgarbage" * 100, MP),
    (b"", MP),
    (b"--b0undary\r\nContent-Type: text/plain\r\n\r\nx\r\n--b0undary--\r\n", MP),  # a part without a name
    (b"--b0undary\r\nBad Header Line\r\n\r\nx\r\n--b0undary--\r\n", MP),
])
def test_malformed_multipart_is_400_on_the_wire(server, body, ctype):
    _, c = server
    r = c.post("/form", content=body, headers={"content-type": ctype})
    assert_problem(r, 400)


def test_another_content_type_is_415(server):
    port, c = server
    r = c.post("/form", content=b'{"a":1}', headers={"content-type": "application/json"})
    assert_problem(r, 415, ["application/json"])
    raw = raw_request(port, b"POST /form HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\na=1")
    assert status_of(raw) == 415  # no Content-Type at all


def test_form_model_and_files_bind_on_the_wire(server):
    _, c = server
    r = c.post("/signup", data={"name": "ada", "age": "36", "tags": ["x", "y"]},
               files={"avatar": ("me.png", b"PNG", "image/png")})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["name"] == "ada" and got["age"] == 36 and got["tags"] == ["x", "y"]
    assert got["avatar"]["filename"] == "me.png" and got["avatar"]["size"] == 3
    r = c.post("/signup", data={"name": "ada", "age": "old"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == ["form", "age"]


# -- in process: limits ------------------------------------------------------------------------------
def test_tight_limits_pass_when_respected():
    r = run_call("POST", "/tight", content=multipart(("a", "short"), ("f", "f.txt", "text/plain", b"y" * 50)),
                 headers={"content-type": MP})
    assert r.status_code == 200, r.text
    assert r.json()["items"][1][1]["on_disk"] is True  # 50 bytes > the 10-byte spool threshold


@pytest.mark.parametrize("body,ctype,words", [
    (multipart(("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")), MP, ["more than 3 parts"]),
    (b"a=1&b=2&c=3&d=4", "application/x-www-form-urlencoded", ["more than 3 fields"]),
    (multipart(("a", "x" * 17)), MP, ["form field 'a'", "16 bytes"]),
    (b"a=" + b"x" * 20, "application/x-www-form-urlencoded", ["16 bytes"]),
    (b"n" * 20 + b"=1", "application/x-www-form-urlencoded", ["16 bytes"]),  # the name counts too
    (multipart(("f", "f.bin", "application/octet-stream", b"z" * 101)), MP, ["file 'f'", "100 bytes"]),
    (multipart(("f", "f.bin", "application/octet-stream", b"z" * 99), ("g", "g.bin", "a/b", b"z" * 99),
               ("h", "h.bin", "a/b", b"z" * 99)) + b"\r\n" * 400, MP, ["1000"]),  # total
    (b"--b0undary\r\nContent-Disposition: form-data; name=\"a\"\r\nX-Pad: " + b"p" * 300 + b"\r\n\r\nx\r\n"
     b"--b0undary--\r\n", MP, ["header"]),  # one header line over the part's header budget
    (b"--b0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n" + b"X-Pad: 123456789012345678901\r\n" * 7
     + b"\r\nx\r\n--b0undary--\r\n", MP, ["200 bytes"]),  # short lines, too many bytes together
])
def test_each_form_limit_is_413(body, ctype, words):
    r = run_call("POST", "/tight", content=body, headers={"content-type": ctype})
    assert_problem(r, 413, words)


def test_total_limit_defaults_to_the_apps_max_body():
    app = forms_app.create_app()
    app.max_body = 1000
    body = multipart(("f", "f.bin", "application/octet-stream", b"z" * 2000))
    r = asyncio.run(call(app, "POST", "/form", content=body, headers={"content-type": MP}))
    assert_problem(r, 413, ["1000"])

    async def chunked():
        yield body[:500]
        yield body[500:]

    r = asyncio.run(call(app, "POST", "/form", content=chunked(), headers={"content-type": MP}))
    assert_problem(r, 413)


def test_a_slow_form_body_is_408():
    app = forms_app.create_app(body_timeout=0.2)

    async def slow():
        yield multipart(("a", "1"))[:20]
        await asyncio.sleep(1.0)
        yield b"rest"

    r = asyncio.run(call(app, "POST", "/form", content=slow(), headers={"content-type": MP}))
    assert_problem(r, 408)


def test_text_that_is_not_utf8_is_400():
    r = run_call("POST", "/form", content=b"a=%FF%FE", headers={"content-type": "application/x-www-form-urlencoded"})
    assert_problem(r, 400, ["UTF-8"])
    body = b"--b0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\xff\xfe\r\n--b0undary--\r\n"
    r = run_call("POST", "/form", content=body, headers={"content-type": MP})
    assert_problem(r, 400, ["UTF-8"])


def test_an_overlong_boundary_is_400():
    b = "x" * 300
    r = run_call("POST", "/form", content=multipart(("a", "1"), boundary=b),
                 headers={"content-type": f"multipart/form-data; boundary={b}"})
    assert_problem(r, 400, ["Boundary length"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.sampled_from([MP, "application/x-www-form-urlencoded"]))
def test_random_bodies_never_crash(body, ctype):
    r = run_call("POST", "/form", content=body, headers={"content-type": ctype})
    assert r.status_code in (200, 400, 413), r.text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=200), st.binary(max_size=40))
def test_damaged_multipart_never_crashes(cut, noise):
    good = multipart(("a", "1"), ("f", "f.txt", "text/plain", b"hello world"))
    r = run_call("POST", "/form", content=good[:cut] + noise + good[cut:], headers={"content-type": MP})
    assert r.status_code in (200, 400), r.text


# -- in process: the objects ------------------------------------------------------------------------
def _asgi_request(body: bytes, ctype: str, chunk: int = 7) -> Request:
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)] or [b""]
    msgs = [{"type": "http.request", "body": p, "more_body": i < len(pieces) - 1} for i, p in enumerate(pieces)]

    async def receive():
        return msgs.pop(0) if msgs else {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": "/", "query_string": b"",
             "headers": [(b"content-type", ctype.encode())]}
    return Request(scope, receive, {}, 1 << 20, None)


def test_formdata_is_a_multi_dict_and_uploads_read_seek_close():
    body = multipart(("a", "1"), ("f", "x.txt", "text/plain", b"0123456789"), ("a", "2"))

    async def go():
        req = _asgi_request(body, MP)
        form = await req.form(FormLimits(spool_threshold=4))
        assert await req.form() is form  # cached
        assert form["a"] == "2" and form.get("a") == "2" and form.getall("a") == ["1", "2"] == form.getlist("a")
        assert form.get("zz", "d") == "d" and form.getall("zz") == [] and "f" in form and "zz" not in form
        assert list(form.keys()) == ["a", "f"] and len(form) == 2 and list(form) == ["a", "f"]
        assert [k for k, _ in form.items()] == ["a", "f", "a"]
        with pytest.raises(KeyError):
            form["zz"]
        up = form["f"]
        assert isinstance(up, UploadFile) and up.on_disk and up.size == 10
        assert up.headers["content-type"] == "text/plain" and up.content_type == "text/plain"
        assert await up.read(4) == b"0123" and await up.read() == b"456789"
        await up.seek(2)
        assert await up.read(3) == b"234"
        with pytest.raises(RuntimeError):
            await req.body()  # streamed into the parser, not kept
        await req.close()
        assert up.closed
        await req.close()  # twice: nothing to do
    asyncio.run(go())


def test_upload_file_has_starlettes_read_size_and_write():
    body = multipart(("f", "x.txt", "text/plain", b"0123"))

    async def go():
        req = _asgi_request(body, MP)
        up = (await req.form(FormLimits(spool_threshold=6)))["f"]
        assert await up.read(size=2) == b"01" and not up.on_disk
        await up.seek(0, 2)
        await up.write(b"4567")  # past the threshold: moved to disk
        assert up.size == 8 and up.on_disk
        await up.seek(0)
        assert await up.read() == b"01234567"
        await req.close()
    asyncio.run(go())


def test_form_after_body_parses_the_kept_body_and_close_without_form_is_fine():
    async def go():
        req = _asgi_request(b"x=1&y=2", "application/x-www-form-urlencoded")
        assert await req.body() == b"x=1&y=2"
        form = await req.form()
        assert isinstance(form, FormData) and dict(form.items()) == {"x": "1", "y": "2"}
        await _asgi_request(b"", MP).close()
    asyncio.run(go())


def test_a_failed_parse_closes_the_files_it_opened():
    opened = []
    real_init = UploadFile.__init__

    def spy(self, *a, **kw):
        real_init(self, *a, **kw)
        opened.append(self)

    body = multipart(("f", "f.bin", "a/b", b"1" * 50), close=False)  # truncated after a whole file

    async def go():
        UploadFile.__init__ = spy
        try:
            with pytest.raises(Exception) as e:
                await _asgi_request(body, MP).form(FormLimits(spool_threshold=8))
        finally:
            UploadFile.__init__ = real_init
        assert getattr(e.value, "status", None) == 400
    asyncio.run(go())
    assert opened and all(f.closed for f in opened)


# -- file names and per-kind counts ------------------------------------------------------------------
def _one_file(disposition: str) -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"f\"; {disposition}\r\n"
            f"Content-Type: text/plain\r\n\r\nhello\r\n--{BOUNDARY}--\r\n").encode("utf-8")


@pytest.mark.parametrize("disposition, filename", [
    ("filename*=UTF-8''na%C3%AFve%20%E2%82%AC.txt", "naïve €.txt"),  # RFC 8187 alone: still a file
    ("filename=\"euro.txt\"; filename*=utf-8''%E2%82%AC.txt", "€.txt"),  # the extended form wins
    ("filename*=iso-8859-1'fr'caf%E9.txt; filename=\"cafe.txt\"", "café.txt"),
    ("filename=\"plain.txt\"; filename*=UTF-8''%FF%FE.txt", "plain.txt"),  # undecodable: the plain one
    ("filename=\"plain.txt\"; filename*=koi8-r''x.txt", "plain.txt"),  # a charset RFC 8187 does not require
    ("filename=\"a; filename*=UTF-8''evil.txt\"", "a; filename*=UTF-8''evil.txt"),  # inside a quoted value
    ("filename=\"café.txt\"", "café.txt"),  # raw UTF-8, as browsers send it
    ("filename=\"../../etc/passwd\"", "passwd"),  # paths cut to their last segment
    ("filename=\"/abs/dir/b.txt\"", "b.txt"),
    ("filename=\"folder/sub\\\\c.txt\"", "c.txt"),
    ("filename*=UTF-8''..%2F..%2Fx.txt", "x.txt"),
    ("filename=\"..\"", ""),
    ("filename=\"\"", ""),  # an empty file input: a file part without a name
])
def test_upload_filenames(disposition, filename):
    with TestClient(forms_app.create_app()) as c:
        r = c.post("/form", content=_one_file(disposition), headers={"content-type": MP})
    assert r.status_code == 200, r.text
    ((name, desc),) = r.json()["items"]
    assert name == "f" and desc["filename"] == filename and desc["size"] == 5


def test_max_files_and_max_fields_are_413():
    app = forms_app.create_app()
    limits = FormLimits(max_files=1, max_fields=2)

    @app.post("/few")
    async def few(request: Request):
        return {"n": len((await request.form(limits)).items())}

    two_files = multipart(("a", "1"), ("f", "f.txt", "text/plain", b"x"), ("g", "g.txt", "text/plain", b"y"))
    three_fields = multipart(("a", "1"), ("b", "2"), ("f", "f.txt", "text/plain", b"x"), ("c", "3"))
    with TestClient(app) as c:
        ok = multipart(("a", "1"), ("f", "f.txt", "text/plain", b"x"), ("b", "2"))
        assert c.post("/few", content=ok, headers={"content-type": MP}).json() == {"n": 3}
        assert_problem(c.post("/few", content=two_files, headers={"content-type": MP}), 413, ["more than 1 files"])
        assert_problem(c.post("/few", content=three_fields, headers={"content-type": MP}), 413, ["more than 2 fields"])
        r = c.post("/few", content=b"a=1&b=2&c=3", headers={"content-type": "application/x-www-form-urlencoded"})
        assert_problem(r, 413, ["more than 2 fields"])
