"""Response-side features: cookies, redirects, header copies for middleware, the JSON/HTML aliases,
server-sent events.  The rules in process; the wire on granian (RSGI and ASGI) and uvicorn, including
an SSE client that leaves (the source's ``finally`` runs and no stream task is left)."""
import asyncio
import socket
import threading
import time
from http.cookies import SimpleCookie
from datetime import datetime, timedelta, timezone

import pytest

from files_app import SERVERS, make_tree, serving
from server_util import raw_request

from aquilia_app import App, HTMLResponse, JSONResponse, Request
from aquilia_app.requests import parse_cookie_header
from aquilia_app.responses import (CT_JSON, MAX_COOKIE_SIZE, RedirectResponse, Response, StreamingResponse,
                                   cookie_header, problem)
from aquilia_app.rsgi import response_headers
from aquilia_app.sse import PING, EventSourceResponse, ServerSentEvent
from aquilia_app.testclient import TestClient


# -- cookies --------------------------------------------------------------------------------------
def test_cookie_attributes():
    assert cookie_header("a", "b") == "a=b; Path=/; SameSite=Lax"
    full = cookie_header("sid", '"x!y"', max_age=60, path="/app", domain=".example.com", secure=True,
                         httponly=True, samesite="None", partitioned=True)
    assert full == ('sid="\\"x!y\\""; Max-Age=60; Path=/app; Domain=.example.com; Secure; HttpOnly; SameSite=None; '
                    "Partitioned")
    assert cookie_header("a", "", path=None, samesite=None) == "a="
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert "Expires=Wed, 02 Jan 2030 01:04:05 GMT" in cookie_header("a", "b", expires=when)
    assert "Expires=Wed, 02 Jan 2030 03:04:05 GMT" in cookie_header("a", "b", expires=when.replace(tzinfo=None))
    expires = cookie_header("a", "b", expires=3600).split("Expires=")[1].split(";")[0]
    assert abs(datetime.strptime(expires, "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=timezone.utc).timestamp()
               - time.time() - 3600) < 5
    assert "Expires=Fri, 01 Jan 2100 00:00:00 GMT" in cookie_header("a", "b", expires="Fri, 01 Jan 2100 00:00:00 GMT")


@pytest.mark.parametrize("kw", [
    {"key": "a b"}, {"key": "a;b"}, {"key": "a:b"}, {"key": ""}, {"key": "caf\u00e9"}, {"key": "a=b"},
    {"value": "a\r\nSet-Cookie: x=1"}, {"value": "a\nb"}, {"value": "a\rb"}, {"value": "x" * MAX_COOKIE_SIZE},
    {"value": "\\" * (MAX_COOKIE_SIZE // 2)},  # its escaped form is twice as long
    {"value": "\u20ac"}, {"value": None}, {"value": b"v"}, {"value": True}, {"value": ["v"]},
    {"path": "/a;b"}, {"path": "/a\nb"}, {"domain": "exa mple.com"}, {"domain": "a;b"}, {"domain": "-x.com"},
    {"samesite": "sometimes"}, {"samesite": "none"}, {"partitioned": True},
    {"key": "__Secure-id"}, {"key": "__Host-id", "secure": True, "path": "/app"},
    {"key": "__host-id", "secure": True, "domain": "example.com"},
    {"max_age": "60"}, {"max_age": 1.5}, {"max_age": True}, {"expires": "a;b"}, {"expires": object()},
])
def test_bad_cookies_are_refused(kw):
    args = {"key": "k", "value": "v", **kw}
    with pytest.raises(ValueError):
        cookie_header(**args)


@pytest.mark.parametrize("value", ["plain", "a=b/c?(d)@[e]{f}<g>", "", "eyJhIjoxfQ==", 42, -7, 1.5])
def test_cookie_octet_values_go_out_as_they_are(value):
    assert cookie_header("k", value, path=None, samesite=None) == f"k={value}"


@pytest.mark.parametrize("value", ["a b", "a;b", "a,b", 'say "hi"', '"pre-quoted"', "back\\slash", "caf\u00e9",
                                   "tab\there", "x=y z", "\x00\x7f\u00ff", "\\", '"'])
def test_other_values_are_quoted_as_http_cookies_does_and_read_back(value):
    header = cookie_header("k", value, path=None, samesite=None)
    oracle = SimpleCookie()
    oracle["k"] = value
    assert header == oracle.output(header="").strip()  # the same quoting and escapes
    assert parse_cookie_header(header) == {"k": value}  # our parser reads back the original
    back = SimpleCookie()
    back.load(header)
    assert back["k"].value == value  # and so does Python's


def test_cookie_values_round_trip_through_a_client():
    values = {"spaced": "hello world", "list": "a,b;c", "quote": 'say "hi"', "slash": "C:\\tmp", "accent": "Jos\u00e9",
              "num": 42, "real": 2.5, "plain": "abc123"}
    app = App()

    @app.get("/set")
    async def set_them():
        resp = Response.text("set")
        for k, v in values.items():
            resp.set_cookie(k, v)
        return resp

    @app.get("/read")
    async def read(request: Request):
        return request.cookies

    with TestClient(app) as client:
        assert client.get("/set").status_code == 200
        assert client.get("/read").json() == {k: str(v) for k, v in values.items()}


def test_cookie_limits_and_prefixes_that_pass():
    assert cookie_header("k", "v" * (MAX_COOKIE_SIZE - 1))
    assert cookie_header("__Host-id", "1", secure=True).startswith("__Host-id=1; Path=/; Secure")
    assert "SameSite=Strict" in cookie_header("a", "b", samesite="STRICT")


def test_set_and_delete_cookie_on_every_kind_of_response():
    r = Response.text("x")
    assert r.set_cookie("a", "1") is r and r.header("set-cookie") == "a=1; Path=/; SameSite=Lax"
    r.delete_cookie("a", path="/p")
    assert r.raw_headers[-1] == (b"set-cookie", b"a=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/p; "
                                                b"SameSite=Lax")
    s = StreamingResponse(iter([b"x"])).set_cookie("b", "2", httponly=True)
    assert s.header("set-cookie") == "b=2; Path=/; HttpOnly; SameSite=Lax"
    e = EventSourceResponse(_agen()).set_cookie("c", "3")
    assert e.header("set-cookie") == "c=3; Path=/; SameSite=Lax"


# -- header copies for middleware, aliases ---------------------------------------------------------------
def test_with_headers_copies_a_response_and_leaves_the_shared_one_alone():
    shared = problem(404, "Not Found")
    before = list(shared.raw_headers)
    copy = shared.with_headers([("x-a", "1"), (b"vary", b"origin")])
    assert copy is not shared and copy.body is shared.body and copy.status == 404
    assert shared.raw_headers == before and shared.extra is None
    assert copy.header("x-a") == "1" and copy.header("vary") == "origin"
    assert copy.raw_headers[1] == (b"content-length", b"%d" % len(shared.body))
    again = copy.with_headers([("x-a", "2")], replace=True)
    assert [v for k, v in again.raw_headers if k == b"x-a"] == [b"2"] and copy.header("x-a") == "1"
    with pytest.raises(ValueError):
        shared.with_headers([("x", "a\r\nb")])


@pytest.mark.parametrize("bad", ["\r", "\n", "\r\n"])
@pytest.mark.parametrize("where", ["name", "value"])
@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_header_with_cr_or_lf_anywhere_is_refused(bad, where, as_bytes):
    text = f"x{bad}Set-Cookie: evil=1"
    pair = (text, "ok") if where == "name" else ("x-a", text)
    if as_bytes:
        pair = tuple(p.encode("latin-1") for p in pair)
    with pytest.raises(ValueError, match="CR or LF"):
        Response(b"", 200, [pair])
    assert Response(b"", 200, [("x-a", "a\tb")]).raw_headers[-1] == (b"x-a", b"a\tb")  # other controls pass


def test_with_headers_keeps_a_subclass_and_its_attributes():
    class Tagged(Response):
        def __init__(self, tag):
            super().__init__(b"t", 201, [("x-tag", tag)])
            self.tag = tag

    t = Tagged("one")
    c = t.with_headers([("x-more", "1")])
    assert type(c) is Tagged and c.tag == "one" and c.status == 201
    assert c.header("x-tag") == "one" and c.header("x-more") == "1" and t.header("x-more") is None


def test_per_request_responses_change_in_place():
    s = StreamingResponse(iter([b"x"]), headers=[("connection", "keep-alive")])
    assert s.with_headers([("connection", "close")], replace=True) is s
    assert s.raw_headers == [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
    s.add_header("X-Up", "1")
    assert s.rsgi_headers()[-1] == ("x-up", "1")


@pytest.mark.parametrize("status", [101, 204, 304])
def test_no_content_length_where_rfc_9110_forbids_it(status):
    r = Response(b"", status, [("x-a", "1")])
    assert r.header("content-length") is None and r.header("x-a") == "1"
    assert r.with_headers([("x-b", "2")]).header("content-length") is None
    assert Response(b"", 200).header("content-length") == "0"


def test_a_subclass_names_its_media_type_as_in_starlette():
    class XMLResponse(Response):
        media_type = "application/xml"

    class CSVResponse(Response):
        media_type = "text/csv"

    class Plain(Response):
        pass

    assert XMLResponse("<a/>").header("content-type") == "application/xml"
    assert CSVResponse("a,b").header("content-type") == "text/csv; charset=utf-8"
    assert XMLResponse("<a/>", media_type="text/html").header("content-type") == "text/html; charset=utf-8"
    assert Plain("x").header("content-type") == "text/plain; charset=utf-8"
    assert response_headers(XMLResponse("<a/>"))[0] == ("content-type", "application/xml")  # RSGI too


def test_add_header_invalidates_the_built_headers():
    r = Response.json({"a": 1})
    assert len(r.raw_headers) == 2
    r.add_header("x-a", "1")
    assert r.raw_headers[-1] == (b"x-a", b"1")


def test_json_and_html_aliases_are_the_response_constructors():
    assert JSONResponse == Response.json and HTMLResponse == Response.html
    r = JSONResponse({"a": [1, 2]}, 201, [("x", "1")])
    assert type(r) is Response and r.status == 201 and r.body == b'{"a":[1,2]}' and r.media_type == b"application/json"
    assert HTMLResponse("<b>x</b>").media_type == b"text/html; charset=utf-8"


@pytest.mark.parametrize("given, sent", [
    ("text/plain", "text/plain; charset=utf-8"), ("text/csv", "text/csv; charset=utf-8"),
    (b"text/html", "text/html; charset=utf-8"),
    ("Text/Markdown; variant=GFM", "Text/Markdown; variant=GFM; charset=utf-8"),
    ("text/csv; charset=latin-1", "text/csv; charset=latin-1"),
    ("TEXT/PLAIN;Charset=ascii", "TEXT/PLAIN;Charset=ascii"),
    ("application/json", "application/json"), (b"image/png", "image/png"), ("application/xml", "application/xml"),
])
def test_a_text_media_type_without_charset_gets_utf_8(given, sent):
    for _ in range(2):  # the second time from the cache
        r = Response(b"hi", media_type=given)
        assert r.header("content-type") == sent and response_headers(r)[0] == ("content-type", sent)
    assert StreamingResponse(iter([b"x"]), media_type=given).header("content-type") == sent


def test_json_takes_what_json_dumps_takes():
    """As Starlette's and FastAPI's JSON: dict keys that are not str are sent as their text, and an
    integer beyond 64 bits is sent whole, never a 500."""
    import enum
    import uuid

    class Kind(enum.Enum):
        a = "a"

    app = App()

    @app.get("/counts")
    async def counts():
        return {1: "one", 2: [2 ** 70], Kind.a: {uuid.UUID(int=1): True}}

    @app.get("/big")
    async def big():
        return JSONResponse({"n": -(2 ** 80)})

    with TestClient(app) as c:
        r = c.get("/counts")
        assert r.status_code == 200 and r.json() == {"1": "one", "2": [2 ** 70],
                                                     "a": {"00000000-0000-0000-0000-000000000001": True}}
        r = c.get("/big")
        assert r.status_code == 200 and r.json() == {"n": -(2 ** 80)}
    with pytest.raises(TypeError):  # what neither encoder knows is still an error
        Response.json({"x": object()})


def test_the_module_media_types_are_kept_as_they_are():
    assert Response.json({}).media_type is CT_JSON  # the shared constant: rsgi's per-type header cache hits
    assert Response.text("x").media_type == b"text/plain; charset=utf-8" == Response(b"").media_type
    assert problem(404, "x").media_type == b"application/problem+json"


def test_text_charset_through_the_client():
    app = App()

    @app.get("/csv")
    async def csv():
        return Response("a,b\n1,\u00e9\n", media_type="text/csv")

    with TestClient(app) as client:
        r = client.get("/csv")
        assert r.headers["content-type"] == "text/csv; charset=utf-8" and r.text == "a,b\n1,\u00e9\n"


# -- redirects ------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_statuses(status):
    r = RedirectResponse("/next", status)
    assert r.status == status and r.header("location") == "/next" and r.body == b""


@pytest.mark.parametrize("status", [200, 300, 304, 305, 306, 309, 404, "307"])
def test_redirect_refuses_other_statuses(status):
    with pytest.raises(ValueError):
        RedirectResponse("/x", status)


@pytest.mark.parametrize("url,location", [
    ("https://example.com/a/b?x=1&y=2#f", "https://example.com/a/b?x=1&y=2#f"),
    ("/caf\u00e9 menu", "/caf%C3%A9%20menu"),
    ("/ok%20already", "/ok%20already"),
    ("/100%", "/100%25"),
    ("/x\r\nSet-Cookie: evil=1", "/x%0D%0ASet-Cookie:%20evil=1"),
    ('/<script>"', "/%3Cscript%3E%22"),
])
def test_redirect_location_is_encoded(url, location):
    assert RedirectResponse(url).header("location") == location


def test_redirect_needs_a_url():
    for bad in ("", None, b"/x"):
        with pytest.raises(ValueError):
            RedirectResponse(bad)


# -- server-sent events: encoding ------------------------------------------------------------------
async def _agen():
    yield "x"


def test_event_encoding():
    assert ServerSentEvent("hi").encode() == b"data: hi\n\n"
    assert ServerSentEvent("a\nb\r\nc\rd\n").encode() == b"data: a\ndata: b\ndata: c\ndata: d\ndata: \n\n"
    assert ServerSentEvent(" lead").encode() == b"data:  lead\n\n"  # the parser drops one space only
    assert ServerSentEvent({"k": "\u00e9\n"}).encode() == b'data: {"k":"\xc3\xa9\\n"}\n\n'
    full = ServerSentEvent("d", event="update", id="7", retry=2500, comment="c1\nc2")
    assert full.encode() == b": c1\n: c2\nevent: update\nid: 7\nretry: 2500\ndata: d\n\n"
    assert ServerSentEvent(comment="").encode() == b":\n\n"
    assert ServerSentEvent(id="").encode() == b"id: \n\n"  # resets the client's last event id
    assert ServerSentEvent("\u2028x").encode() == "data: \u2028x\n\n".encode()  # not a line end here


@pytest.mark.parametrize("kw", [{"event": "a\nb"}, {"event": "a\rb"}, {"id": "1\n2"}, {"id": "1\x002"},
                                {"retry": -1}, {"retry": 1.5}, {"retry": True}, {}, {"data": b"\xff"}])
def test_bad_events_are_refused(kw):
    with pytest.raises(ValueError):
        ServerSentEvent(**kw)


def test_event_source_arguments():
    for source in ("a str is no event source", b"bytes", 42, None):
        with pytest.raises(TypeError):
            EventSourceResponse(source)
    for ping in (0, -1):
        with pytest.raises(ValueError):
            EventSourceResponse(_agen(), ping=ping)
    r = EventSourceResponse(_agen(), ping=None, headers=[("x-a", "1")])
    assert r.raw_headers == [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                             (b"x-accel-buffering", b"no"), (b"x-a", b"1")]


def test_event_source_headers_replace_the_defaults_of_their_name():
    # sse-starlette: the caller's Cache-Control wins; two Cache-Control headers would be combined by
    # clients and caches ("no-cache, no-store"), and a caller's X-Accel-Buffering must not be doubled
    r = EventSourceResponse(_agen(), headers={"Cache-Control": "no-store", "X-Accel-Buffering": "yes"})
    assert r.raw_headers == [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"),
                             (b"x-accel-buffering", b"yes")]


def _asgi_messages(resp, *, disconnect_after: float | None = None):
    """Run ``resp`` as an ASGI app; returns the sent messages."""
    sent = []

    async def main():
        gone = asyncio.Event()

        async def receive():
            if disconnect_after is None:
                await asyncio.Event().wait()
            await asyncio.sleep(disconnect_after)
            gone.set()
            return {"type": "http.disconnect"}

        async def send(msg):
            sent.append(msg)

        await resp({"type": "http", "method": "GET"}, receive, send)

    asyncio.run(main())
    return sent


def test_sse_asgi_in_process_with_pings_and_disconnect():
    closed = []

    async def slow():
        try:
            yield ServerSentEvent("first", id="1")
            await asyncio.sleep(3600)
            yield "never"
        finally:
            closed.append(True)

    sent = _asgi_messages(EventSourceResponse(slow(), ping=0.05), disconnect_after=0.3)
    bodies = [m["body"] for m in sent[1:]]
    assert sent[0]["status"] == 200 and bodies[0] == b"id: 1\ndata: first\n\n"
    assert 3 <= bodies.count(PING) <= 7 and closed == [True]
    assert all(m.get("more_body") for m in sent[1:])  # cut off: no final empty body


@pytest.mark.parametrize("kind", [list, tuple, iter, "generator"])
def test_sse_sync_sources(kind):
    items = ["a", {"k": 1}, ServerSentEvent("c", id="3")]
    source = (x for x in items) if kind == "generator" else kind(items)
    sent = _asgi_messages(EventSourceResponse(source, ping=None))
    assert [m["body"] for m in sent[1:]] == [b"data: a\n\n", b'data: {"k":1}\n\n', b"id: 3\ndata: c\n\n", b""]


def test_a_blocking_sync_generator_runs_off_the_event_loop():
    threads = []

    def slow():
        threads.append(threading.current_thread())
        yield "first"
        time.sleep(0.3)  # blocking: the pings below only go out if the loop is free meanwhile
        yield "second"

    sent = _asgi_messages(EventSourceResponse(slow(), ping=0.05))
    bodies = [m["body"] for m in sent[1:]]
    assert bodies[0] == b"data: first\n\n" and bodies[-2:] == [b"data: second\n\n", b""]
    assert bodies.count(PING) >= 3 and threads[0] is not threading.main_thread()


def test_a_streaming_responses_blocking_sync_generator_runs_off_the_event_loop():
    threads, ticks = [], []

    def slow():
        threads.append(threading.current_thread())
        yield "first"
        time.sleep(0.3)  # blocking: the ticker below only runs if the loop is free meanwhile
        yield b"second"

    async def main():
        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        sent = []

        async def send(msg):
            sent.append(msg)

        tick = asyncio.ensure_future(ticker())
        await StreamingResponse(slow())({"type": "http", "method": "GET"}, None, send)
        tick.cancel()
        return sent

    sent = asyncio.run(main())
    assert [m.get("body") for m in sent[1:]] == [b"first", b"second", b""]
    assert threads[0] is not threading.main_thread() and len(ticks) >= 8, ticks


@pytest.mark.parametrize("leave_at", [1, 3])
def test_a_streaming_responses_sync_generator_is_closed_when_the_send_fails(leave_at):
    closed = []

    def endless():
        try:
            while True:
                yield b"tick"
        finally:
            closed.append(True)

    async def main():
        count = []

        async def send(msg):  # the client leaves: the server's send raises
            count.append(msg)
            if len(count) > leave_at:
                raise OSError("client gone")

        with pytest.raises(OSError):
            await StreamingResponse(endless())({"type": "http", "method": "GET"}, None, send)
        assert closed == [True]  # at once, not when the generator is collected

    asyncio.run(main())


def test_lists_stream_inline_and_a_sync_generator_is_closed_at_its_end():
    finished = []

    def gen():
        try:
            yield "a"
        finally:
            finished.append(True)

    assert [m.get("body") for m in _asgi_messages(StreamingResponse(["x", b"y"]))[1:]] == [b"x", b"y", b""]
    assert [m.get("body") for m in _asgi_messages(StreamingResponse(gen()))[1:]] == [b"a", b""]
    assert finished == [True]


def test_a_sync_generator_is_closed_when_the_client_leaves():
    closed = []

    def endless():
        try:
            while True:
                yield "tick"
                time.sleep(0.2)
        finally:
            closed.append(threading.current_thread())

    async def main():
        sent = []

        async def receive():
            await asyncio.sleep(0.1)
            return {"type": "http.disconnect"}

        async def send(msg):
            sent.append(msg)

        await EventSourceResponse(endless(), ping=None)({"type": "http", "method": "GET"}, receive, send)
        assert closed == []  # the next() under way when the client left cannot be stopped ...
        await asyncio.sleep(0.3)
        return sent

    sent = asyncio.run(main())
    assert closed == [threading.main_thread()]  # ... so the close followed its return, on the loop
    assert [m["body"] for m in sent[1:]] == [b"data: tick\n\n"]


def test_sse_source_errors_propagate_after_closing():
    async def bad():
        yield "ok"
        raise LookupError("broken source")

    with pytest.raises(LookupError):
        _asgi_messages(EventSourceResponse(bad(), ping=None))


# -- on the wire ----------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=list(SERVERS))
def server(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("resp")
    make_tree(str(base))
    with serving(request.param, str(base)) as (port, client):
        yield port, client


def test_cookies_on_the_wire(server):
    _, c = server
    r = c.get("/cookies")
    assert r.status_code == 200 and r.text == "cookies"
    assert r.headers.get_list("set-cookie") == [
        "plain=v1; Path=/; SameSite=Lax",
        "sid=abc123; Max-Age=3600; Path=/app; Domain=example.com; Secure; HttpOnly; SameSite=Strict",
        'cross="\\"quoted\\""; Path=/; Secure; SameSite=None; Partitioned',
        "old=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/; SameSite=Lax",
    ]
    assert c.cookies.get("plain") == "v1"  # httpx's cookie jar took it
    r = c.get("/cookie-stream")
    assert r.text == "streamed" and r.headers["set-cookie"] == "s=1; Path=/; HttpOnly; SameSite=Lax"


def test_no_content_body_has_no_content_length_on_the_wire(server):
    port, _ = server
    head = raw_request(port, b"GET /nothing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 204") and b"content-length" not in head.lower(), head


def test_redirects_on_the_wire(server):
    _, c = server
    for status in (301, 302, 303, 307, 308):
        r = c.get("/redirect", params={"to": "/caf\u00e9?a=1", "status": status})
        assert r.status_code == status and r.headers["location"] == "/caf%C3%A9?a=1" and r.content == b""
    r = c.get("/redirect", params={"to": "/x\r\nSet-Cookie: evil=1"})
    assert r.status_code == 307 and r.headers["location"] == "/x%0D%0ASet-Cookie:%20evil=1"
    assert "set-cookie" not in r.headers
    assert c.get("/redirect", params={"to": "/x", "status": 200}).status_code == 500  # a bug in the handler
    r = c.get("/redirect", params={"to": "/healthz"}, follow_redirects=True)
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def _events(text: str) -> list:
    return [block for block in text.split("\n\n") if block]


def test_sse_on_the_wire(server):
    _, c = server
    with c.stream("GET", "/sse", params={"n": 3}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        assert r.headers["cache-control"] == "no-cache" and r.headers["x-accel-buffering"] == "no"
        text = r.read().decode()
    assert _events(text) == ['event: tick\nid: 0\ndata: {"i":0}', 'event: tick\nid: 1\ndata: {"i":1}',
                             'event: tick\nid: 2\ndata: {"i":2}', "data: multi\ndata: line"]


def test_sse_pings_while_idle(server):
    _, c = server
    r = c.get("/sse", params={"n": 2, "delay": 0.35, "ping": 0.1})
    blocks = _events(r.text)
    assert blocks[0].startswith("event: tick\nid: 0") and blocks[-1] == "data: multi\ndata: line"
    assert 3 <= blocks.count(": ping") <= 12


def _sse_state(c) -> dict:
    return c.get("/sse-state").json()


def test_sse_client_leaving_closes_the_source(server):
    port, c = server
    before = _sse_state(c)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /sse?n=1000000&delay=0.05&ping=0.02 HTTP/1.1\r\nHost: t\r\n\r\n")
        got = b""
        while b"data: " not in got:
            chunk = s.recv(4096)
            assert chunk, got  # the server closed the connection before the first event
            got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got
        running = _sse_state(c)
        assert running["sse_started"] == before["sse_started"] + 1
        assert running["alive"] == before["alive"] + 3  # producer, disconnect watcher, pinger
    deadline = time.monotonic() + 5
    while True:
        state = _sse_state(c)
        if state["sse_closed"] == before["sse_closed"] + 1 and state["alive"] == 0:
            break
        assert time.monotonic() < deadline, state
        time.sleep(0.05)


def test_starlettes_argument_and_attribute_names():
    """Code written for Starlette/FastAPI - ``JSONResponse(status_code=404, content={...})`` in an exception
    handler, ``RedirectResponse(url=..., status_code=303)``, ``response.status_code`` in a middleware - works
    as it is, instead of a TypeError (a 500) or an AttributeError."""
    from aquilia_app import App, Middleware
    from aquilia_app.testclient import TestClient

    r = JSONResponse(status_code=404, content={"message": "gone"})
    assert (r.status, r.status_code, r.body) == (404, 404, b'{"message":"gone"}')
    assert JSONResponse(content=None).body == b"null"
    assert HTMLResponse(content="<b>x</b>", status_code=418).status_code == 418
    assert Response.text(content="hi", status_code=201).body == b"hi"
    r = RedirectResponse(url="/next", status_code=303)
    assert r.status_code == 303 and r.header("location") == "/next"
    with pytest.raises(TypeError):
        JSONResponse({"a": 1}, content={"a": 1}, status_code=200)
    r = Response.json({"a": 1})
    r.status_code = 202
    assert r.status == 202 and r.raw_headers[1] == (b"content-length", b"7")
    assert StreamingResponse([]).status_code == 200

    class Status(Middleware):
        async def __call__(self, request, call_next):
            resp = await call_next(request)
            return resp.with_headers([("x-status", str(resp.status_code))])

    app = App()
    app.add_middleware(Status())

    @app.exception_handler(KeyError)
    async def missing(request, exc):
        return JSONResponse(status_code=404, content={"message": f"no {exc}"})

    @app.get("/thing")
    async def thing():
        raise KeyError("thing")

    with TestClient(app) as client:
        r = client.get("/thing")
        assert r.status_code == 404 and r.json() == {"message": "no 'thing'"} and r.headers["x-status"] == "404"
