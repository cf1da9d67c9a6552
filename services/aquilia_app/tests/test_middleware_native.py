"""The built-in native middleware: CORS, compression, sessions, request ids, trusted hosts and
timeouts.  Their logic in process (httpx.ASGITransport), then each on the wire through the real
granian server (RSGI and ASGI) serving native_mw_app.py, where they are chained by priority."""
import asyncio
import gzip
import logging
import re
import socket
import time
import uuid
import zlib

import brotli
import httpx
import pytest
import zstandard

from aquilia_app import REQUEST, App, Container, Request, Response, StreamingResponse
from aquilia_app.compression import CompressionMiddleware, compressible, negotiate
from aquilia_app.cors import CORSMiddleware
from aquilia_app.files import FileResponse
from aquilia_app.middleware import Middleware
from aquilia_app.proxy_headers import ProxyHeadersMiddleware
from aquilia_app.request_id import RequestIdLogFilter, RequestIdMiddleware, current_request_id
from aquilia_app.sessions import MAX_SESSION_COOKIE, Session, SessionMiddleware
from aquilia_app.sse import EventSourceResponse
from aquilia_app.testclient import TestClient
from aquilia_app.timeouts import TimeoutMiddleware
from aquilia_app.trusted_hosts import TrustedHostMiddleware, split_host

import native_mw_app
from server_util import running_server

SECRET = "k" * 32
ORIGIN = "https://app.example.com"
TEXT = "compress me, compress me again and again\n" * 100  # 4 KB of text


def run(coro):
    return asyncio.run(coro)


def app_with(*middleware, debug=True, **kw) -> App:
    """An app with a few routes and the given (middleware, priority) pairs or instances."""
    app = App(debug=debug, **kw)
    for i, mw in enumerate(middleware):
        mw, prio = mw if isinstance(mw, tuple) else (mw, 100 + i)
        app.add_middleware(mw, priority=prio)

    @app.get("/text")
    async def text():
        return Response(TEXT, headers=[("etag", '"v1"')])

    @app.get("/json")
    async def json_route():
        return {"items": [TEXT[:200]] * 5}

    @app.get("/shared")
    async def shared():
        return SHARED

    @app.get("/empty")
    async def empty():
        return None

    @app.get("/slow")
    async def slow():
        await asyncio.sleep(5)

    return app


SHARED = Response(TEXT, headers=[("x-shared", "1")])  # a module constant: must never change


async def call(app, method, url, headers=None, **kw):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        return await c.request(method, url, headers=headers, **kw)


async def raw_asgi(app, path, headers, method="GET", as_pairs=False):
    """One request straight into the ASGI app (any header list, e.g. two Hosts): (status, headers as a
    dict or, ``as_pairs``, every (name, value) pair, the list of body messages)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.encode(), v.encode()) for k, v in headers], "client": ("1.2.3.4", 5),
             "server": ("t", 80)}
    sent = []
    received = []

    async def receive():  # the (empty) body, then nothing until the app stops listening
        if not received:
            received.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()

    async def send(msg):
        sent.append(msg)

    await app(scope, receive, send)
    start = sent[0]
    pairs = [(k.decode(), v.decode()) for k, v in start["headers"]]
    return start["status"], pairs if as_pairs else dict(pairs), sent[1:]


def decode(coding: str, data: bytes) -> bytes:
    if coding == "gzip":
        return gzip.decompress(data)
    if coding == "br":
        return brotli.decompress(data)
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def decoder(coding: str):
    """An incremental decoder: ``feed(bytes) -> bytes``."""
    if coding == "gzip":
        return zlib.decompressobj(31).decompress
    if coding == "br":
        return brotli.Decompressor().process
    return zstandard.ZstdDecompressor().decompressobj().decompress


# == CORS ================================================================================================
def cors_app(**options):
    return app_with(CORSMiddleware(**options))


def preflight(origin=ORIGIN, method="PUT", headers=None):
    h = {"origin": origin, "access-control-request-method": method}
    if headers:
        h["access-control-request-headers"] = headers
    return h


@pytest.mark.parametrize("options, message", [
    (dict(allow_origins=["https://a.example/"]), "trailing '/'"),
    (dict(allow_origins=["a.example"]), "not an origin"),
    (dict(allow_origins="https://a.example"), "not the string"),
    (dict(allow_origins=["*", "https://a.example"]), "alone"),
    (dict(allow_origins=[ORIGIN], allow_methods=["GET POST"]), "not a valid name"),
    (dict(allow_origins=[ORIGIN], allow_headers=["x bad"]), "not a valid name"),
    (dict(allow_origins=[ORIGIN], allow_credentials=True, expose_headers=["*"]), "literal"),
    (dict(allow_origins=[ORIGIN], max_age=-1), "max_age"),
    (dict(allow_origins=["*"], allow_origin_regex=r"https://.*"), "pointless"),
    (dict(), "allows no origin"),
    (dict(allow_origins=["*"], max_age=True), "max_age"),
])
def test_cors_refuses_bad_configuration(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        CORSMiddleware(**options)


def test_cors_preflight_allowed():
    app = cors_app(allow_origins=[ORIGIN], allow_methods=["GET", "PUT"], allow_headers=["X-Token"], max_age=99)
    r = run(call(app, "OPTIONS", "/anything-even-unrouted", preflight(headers="x-token, content-type")))
    assert r.status_code == 204 and r.content == b""
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert r.headers["access-control-allow-methods"] == "GET, PUT"
    assert r.headers["access-control-allow-headers"] == "x-token, content-type"  # content-type: safelisted
    assert r.headers["access-control-max-age"] == "99"
    assert "access-control-allow-credentials" not in r.headers
    assert "Origin" in r.headers["vary"] and "Access-Control-Request-Headers" in r.headers["vary"]


@pytest.mark.parametrize("headers, detail", [
    (preflight(method="DELETE"), "method 'DELETE' is not allowed"),
    (preflight(headers="x-token, x-secret"), "x-secret not allowed"),
    (preflight(origin="https://evil.example"), "origin 'https://evil.example' is not allowed"),
])
def test_cors_preflight_refused_with_a_problem(headers, detail):
    app = cors_app(allow_origins=[ORIGIN], allow_methods=["GET", "PUT"], allow_headers=["x-token"])
    r = run(call(app, "OPTIONS", "/text", headers))
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    assert detail in r.json()["detail"]
    assert "access-control-allow-origin" not in r.headers  # so the browser refuses


def test_cors_wildcards_and_credentials():
    # '*' lists mean "any" only without credentials: with them, the request's own method/headers come back
    app = cors_app(allow_origins=[ORIGIN], allow_methods=["*"], allow_headers=["*"], allow_credentials=True)
    r = run(call(app, "OPTIONS", "/text", preflight(method="PATCH", headers="x-anything")))
    assert r.status_code == 204
    assert r.headers["access-control-allow-methods"] == "PATCH"
    assert r.headers["access-control-allow-headers"] == "x-anything"
    assert r.headers["access-control-allow-credentials"] == "true"
    app = cors_app(allow_origins=["*"], allow_methods=["*"], allow_headers=["*"])
    r = run(call(app, "OPTIONS", "/text", preflight(method="PATCH", headers="x-anything")))
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.headers["access-control-allow-methods"] == "*" and r.headers["access-control-allow-headers"] == "*"


def test_cors_actual_requests():
    app = cors_app(allow_origins=[ORIGIN], allow_credentials=True, expose_headers=["X-Total"])
    r = run(call(app, "GET", "/json", {"origin": ORIGIN}))
    assert r.status_code == 200 and r.json()["items"]
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert r.headers["access-control-allow-credentials"] == "true"
    assert r.headers["access-control-expose-headers"] == "x-total"
    assert r.headers["vary"] == "Origin"
    r = run(call(app, "GET", "/json", {"origin": "https://evil.example"}))
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers and r.headers["vary"] == "Origin"
    r = run(call(app, "GET", "/json"))  # no Origin: the answer still depends on it, caches must know
    assert "access-control-allow-origin" not in r.headers and r.headers["vary"] == "Origin"
    # an OPTIONS without Access-Control-Request-Method is no preflight: routed (405 here)
    r = run(call(app, "OPTIONS", "/json", {"origin": ORIGIN}))
    assert r.status_code == 405 and r.headers["access-control-allow-origin"] == ORIGIN


def test_cors_any_origin_is_the_same_answer_for_all():
    app = cors_app(allow_origins=["*"])
    for headers in ({"origin": "https://x.example"}, None):
        r = run(call(app, "GET", "/json", headers))
        assert r.headers["access-control-allow-origin"] == "*" and "vary" not in r.headers


def test_cors_any_origin_with_credentials_echoes_each_origin():
    # browsers refuse '*' on a credentialed response: the origin itself comes back, and caches learn it varies
    with TestClient(cors_app(allow_origins=["*"], allow_credentials=True, allow_headers=["*"])) as c:
        for origin in ("https://x.example", "http://localhost:3000"):
            r = c.get("/json", headers={"origin": origin})
            assert r.headers["access-control-allow-origin"] == origin
            assert r.headers["access-control-allow-credentials"] == "true" and r.headers["vary"] == "Origin"
            r = c.options("/json", headers=preflight(origin=origin, method="POST", headers="x-token"))
            assert r.status_code == 204 and r.headers["access-control-allow-origin"] == origin
            assert r.headers["access-control-allow-credentials"] == "true"
            assert r.headers["access-control-allow-headers"] == "x-token"
        r = c.get("/json")
        assert "access-control-allow-origin" not in r.headers and r.headers["vary"] == "Origin"


def test_cors_any_header_names_authorization():
    # Fetch 3.2.3: a '*' in Access-Control-Allow-Headers does not cover Authorization
    with TestClient(cors_app(allow_origins=[ORIGIN], allow_headers=["*"])) as c:
        r = c.options("/json", headers=preflight(method="POST", headers="Authorization, x-token"))
        assert r.status_code == 204
        assert r.headers["access-control-allow-headers"] == "*, authorization"
        r = c.options("/json", headers=preflight(method="POST", headers="x-token"))
        assert r.headers["access-control-allow-headers"] == "*"


def test_cors_origin_regex_and_case():
    app = cors_app(allow_origin_regex=r"https://[a-z]+\.example\.com", allow_origins=["https://Other.example"])
    assert run(call(app, "GET", "/json", {"origin": "https://shop.example.com"})).headers[
        "access-control-allow-origin"] == "https://shop.example.com"
    assert "access-control-allow-origin" not in run(call(app, "GET", "/json", {"origin": "https://x.example.com.evil"})).headers
    assert run(call(app, "GET", "/json", {"origin": "https://other.example"})).headers[
        "access-control-allow-origin"] == "https://other.example"


def test_cors_replaces_a_handlers_own_cors_headers_and_keeps_its_vary():
    # Two Access-Control-Allow-Origin values fail in a browser: the middleware's answer is the one sent
    app = cors_app(allow_origins=[ORIGIN], allow_credentials=True)
    own = [("access-control-allow-origin", "*"), ("access-control-allow-credentials", "false"),
           ("vary", "Accept-Encoding")]

    @app.get("/own")
    async def own_headers():
        return Response("x", headers=own)

    @app.get("/own-stream")
    async def own_stream():
        return StreamingResponse(iter([b"x"]), headers=own)

    for path in ("/own", "/own-stream"):
        status, pairs, _ = run(raw_asgi(app, path, [("origin", ORIGIN)], as_pairs=True))
        assert status == 200
        assert [v for k, v in pairs if k == "access-control-allow-origin"] == [ORIGIN], pairs
        assert [v for k, v in pairs if k == "access-control-allow-credentials"] == ["true"], pairs
        assert [v for k, v in pairs if k == "vary"] == ["Accept-Encoding", "Origin"], pairs


def test_cors_never_changes_a_shared_response():
    app = cors_app(allow_origins=[ORIGIN])
    before = list(SHARED.extra)
    for _ in range(2):
        r = run(call(app, "GET", "/shared", {"origin": ORIGIN}))
        assert r.headers["access-control-allow-origin"] == ORIGIN and r.headers["x-shared"] == "1"
    assert SHARED.extra == before


# == compression ===========================================================================================
@pytest.mark.parametrize("header, expected", [
    ("gzip", "gzip"),
    ("gzip, deflate, br, zstd", "zstd"),  # equal q: the server's preference
    ("gzip;q=1.0, br;q=0.5", "gzip"),
    ("br;q=0.9, gzip;q=0.91", "gzip"),
    ("*", "zstd"),
    ("*;q=0.5, gzip;q=0.8", "gzip"),
    ("*, zstd;q=0", "br"),  # q=0: not acceptable, '*' covers the others
    ("gzip;q=0", None),
    ("identity", None),
    ("identity;q=0, *;q=0", None),  # nothing acceptable: identity anyway (RFC 9110 12.5.3)
    ("", None),
    (None, None),
    ("GZIP", "gzip"),
    ("x-gzip", "gzip"),
    ("deflate, compress", None),
    ("br;q=2, gzip;q=0.5", "gzip"),  # q out of range: the member is ignored
    ("br;q=abc, gzip", "gzip"),
    ("br;q=0.5000, gzip;q=0.1", "gzip"),  # more than 3 decimals: not a qvalue
    ("gzip ; q=0.7 , br;Q=0.8", "br"),
    ("gzip;q=0.5, identity", None),  # identity preferred over every coding on offer
    ("identity;q=0.9, *;q=0.5", None),
    ("gzip, identity", "gzip"),  # a tie: the server's preference
    ("identity;q=0.5, br", "br"),
    (", ,;, gzip", "gzip"),
])
def test_accept_encoding_negotiation(header, expected):
    assert negotiate(header, ("zstd", "br", "gzip")) == expected


@pytest.mark.parametrize("media_type, ok", [
    ("text/html; charset=utf-8", True), ("application/json", True), ("application/problem+json", True),
    ("application/javascript", True), ("image/svg+xml", True), ("application/atom+xml", True),
    ("text/event-stream", False), ("image/png", False), ("video/mp4", False), ("audio/ogg", False),
    ("application/zip", False), ("application/gzip", False), ("application/octet-stream", False),
    ("font/woff2", False), ("APPLICATION/JSON; charset=utf-8", True),
])
def test_compressible_media_types(media_type, ok):
    assert compressible(media_type) is ok


@pytest.mark.parametrize("options", [dict(minimum_size=-1), dict(gzip_level=0), dict(gzip_level=10),
                                     dict(brotli_quality=12), dict(zstd_level=23), dict(encodings=()),
                                     dict(encodings=("gzip", "gzip")), dict(encodings=("deflate",)),
                                     dict(encodings="gzip"), dict(minimum_size=1.5)])
def test_compression_refuses_bad_configuration(options):
    with pytest.raises((ValueError, TypeError)):
        CompressionMiddleware(**options)


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_whole_body_round_trip(coding):
    app = app_with(CompressionMiddleware())
    r = run(call(app, "GET", "/text", {"accept-encoding": coding}))  # httpx decodes all three
    assert r.status_code == 200 and r.headers["content-encoding"] == coding and r.text == TEXT
    assert r.headers["vary"] == "Accept-Encoding" and r.headers["etag"] == 'W/"v1"'


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_whole_body_bytes_decode_with_the_libraries(coding):
    app = app_with(CompressionMiddleware(gzip_level=9, brotli_quality=11, zstd_level=19))
    status, headers, body = run(raw_asgi(app, "/json", [("host", "t"), ("accept-encoding", coding)]))
    data = b"".join(m["body"] for m in body)
    assert status == 200 and headers["content-encoding"] == coding
    assert int(headers["content-length"]) == len(data) < 1000
    assert decode(coding, data) == Response.json({"items": [TEXT[:200]] * 5}).body


def test_what_is_not_compressed():
    app = app_with(CompressionMiddleware(minimum_size=500))

    @app.get("/small")
    async def small():
        return "x" * 499

    @app.get("/at-minimum")
    async def at_minimum():
        return "x" * 500

    @app.get("/png")
    async def png():
        return Response(b"p" * 5000, media_type="image/png")

    @app.get("/encoded")
    async def encoded():
        return Response(gzip.compress(TEXT.encode()), headers=[("content-encoding", "gzip")])

    @app.get("/no-transform")
    async def no_transform():
        return Response(TEXT, headers=[("cache-control", "public, no-transform")])

    @app.get("/not-modified")
    async def not_modified():
        return Response(TEXT, status=304)

    ae = {"accept-encoding": "gzip"}
    r = run(call(app, "GET", "/small", ae))
    assert "content-encoding" not in r.headers and "vary" not in r.headers
    assert run(call(app, "GET", "/at-minimum", ae)).headers["content-encoding"] == "gzip"
    for path in ("/png", "/no-transform", "/not-modified", "/empty"):
        r = run(call(app, "GET", path, ae))
        assert "content-encoding" not in r.headers and "vary" not in r.headers, path
    r = run(call(app, "GET", "/encoded", ae))
    assert r.headers["content-encoding"] == "gzip" and r.text == TEXT  # not compressed twice
    r = run(call(app, "HEAD", "/text", ae))
    assert "content-encoding" not in r.headers and r.headers["content-length"] == str(len(TEXT))
    # a client that wants no compression still learns the response varies by Accept-Encoding
    r = run(call(app, "GET", "/text", {"accept-encoding": "identity"}))
    assert "content-encoding" not in r.headers and r.headers["vary"] == "Accept-Encoding" and r.text == TEXT
    r = run(call(app, "GET", "/text", {"accept-encoding": "br;q=0, gzip;q=0"}))
    assert "content-encoding" not in r.headers


def test_vary_and_content_encoding_are_merged_not_duplicated():
    app = app_with(CompressionMiddleware())

    @app.get("/varies")
    async def varies():
        return Response(TEXT, headers=[("vary", "Cookie, accept-encoding")])

    @app.get("/identity")
    async def identity():
        return Response(TEXT, headers=[("content-encoding", "identity"), ("vary", "Cookie")])

    with TestClient(app) as c:
        for ae in ("gzip", "identity"):
            r = c.get("/varies", headers={"accept-encoding": ae})
            assert r.headers.get_list("vary") == ["Cookie, accept-encoding"] and r.text == TEXT, ae
        r = c.get("/identity", headers={"accept-encoding": "gzip"})
        assert r.headers.get_list("content-encoding") == ["gzip"] and r.text == TEXT
        assert r.headers.get_list("vary") == ["Cookie", "Accept-Encoding"]  # appended to the app's own


def test_head_is_not_compressed_but_varies_as_its_get():
    # RFC 9110 9.3.2: a HEAD answer carries the header fields of the GET; 12.5.5: the GET's
    # representation is selected by Accept-Encoding, so a cache must see Vary on both
    app = app_with(CompressionMiddleware())
    for ae in ("gzip", None):
        headers = {"accept-encoding": ae} if ae else {}
        get = run(call(app, "GET", "/text", headers))
        head = run(call(app, "HEAD", "/text", headers))
        assert get.headers["vary"] == "Accept-Encoding"
        assert head.headers.get("vary") == "Accept-Encoding" and "content-encoding" not in head.headers


def test_files_and_server_sent_events_are_never_compressed(tmp_path):
    """Straight through the middleware (its decision is about the response object it gets back)."""
    mw = CompressionMiddleware()
    big = tmp_path / "big.txt"
    big.write_text(TEXT)
    request = Request({"type": "http", "method": "GET", "path": "/", "query_string": b"",
                       "headers": [(b"accept-encoding", b"gzip, br, zstd")]}, None)

    async def events():
        yield TEXT

    async def through(response):
        before = list(response.raw_headers)

        async def call_next(_):
            return response

        out = await mw(request, call_next)
        return out is response and out.raw_headers == before

    assert run(through(FileResponse(str(big))))
    assert run(through(EventSourceResponse(events())))
    assert not run(through(StreamingResponse(iter([TEXT]))))  # the control: a stream is compressed


def test_shared_response_is_copied_not_changed():
    app = app_with(CompressionMiddleware())
    before = (SHARED.body, list(SHARED.extra), SHARED._raw)
    r = run(call(app, "GET", "/shared", {"accept-encoding": "br"}))
    assert r.headers["content-encoding"] == "br" and r.text == TEXT and r.headers["x-shared"] == "1"
    assert (SHARED.body, list(SHARED.extra), SHARED._raw) == before


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_stream_is_compressed_chunk_by_chunk(coding):
    """Every body message decodes on its own, to exactly the chunk the handler yielded: nothing is
    held back in the compressor (a flush per chunk)."""
    app = app_with(CompressionMiddleware())
    parts = [f"part {i}: " + "abc" * 50 + "\n" for i in range(4)]

    @app.get("/stream")
    async def stream():
        async def gen():
            for p in parts:
                yield p
                yield b""  # empty chunks are skipped, not flushed as empty blocks

        return StreamingResponse(gen(), headers=[("content-length", "99999"), ("etag", '"s"')])

    status, headers, body = run(raw_asgi(app, "/stream", [("host", "t"), ("accept-encoding", coding)]))
    assert status == 200 and headers["content-encoding"] == coding and headers["vary"] == "Accept-Encoding"
    assert "content-length" not in headers and headers["etag"] == 'W/"s"'
    feed = decoder(coding)
    pieces = [feed(m["body"]) for m in body if m["body"]]
    assert pieces[:4] == [p.encode() for p in parts]
    assert b"".join(pieces) == "".join(parts).encode()


def test_stream_source_is_closed_when_the_sender_stops():
    closed = []
    app = app_with(CompressionMiddleware())

    @app.get("/endless")
    async def endless():
        async def gen():
            try:
                while True:
                    yield TEXT
            finally:
                closed.append(True)

        return StreamingResponse(gen())

    async def scenario():
        scope = {"type": "http", "method": "GET", "path": "/endless", "query_string": b"", "scheme": "http",
                 "headers": [(b"host", b"t"), (b"accept-encoding", b"gzip")]}
        seen = []

        async def receive():
            return {"type": "http.request", "body": b""}

        async def send(msg):
            seen.append(msg)
            if len(seen) == 3:
                raise OSError("client gone")

        await app(scope, receive, send)
        return seen

    seen = run(scenario())
    assert len(seen) == 3 and closed == [True]


def test_negotiation_cache_stays_bounded():
    mw = CompressionMiddleware()
    app = app_with(mw)

    async def many():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            for i in range(600):
                r = await c.get("/text", headers={"accept-encoding": f"gzip;q=0.{i % 1000:03d}, x-{i}"})
                assert r.status_code == 200

    run(many())
    assert 0 < len(mw._chosen) <= 256


# == sessions ==============================================================================================
def session_app(mw=None, **options):
    mw = mw or SessionMiddleware(SECRET, **options)
    app = app_with(mw)

    @app.get("/s")
    async def get_session(request: Request):
        return dict(request.session)

    @app.post("/s")
    async def set_session(request: Request, key: str, value: str):
        request.session[key] = value
        return dict(request.session)

    @app.delete("/s")
    async def clear_session(request: Request):
        request.session.clear()

    @app.post("/huge")
    async def huge(request: Request):
        request.session["blob"] = "x" * MAX_SESSION_COOKIE

    @app.post("/unserializable")
    async def unserializable(request: Request):
        request.session["when"] = object()

    return app, mw


def cookie_of(r, name="session"):
    m = re.match(rf"{name}=([^;]*)", r.headers.get("set-cookie", ""))
    return m.group(1) if m else None


@pytest.mark.parametrize("options, message", [
    (dict(secret_key="short"), "at least 16 bytes"),
    (dict(secret_key=[]), "at least one key"),
    (dict(secret_key=[SECRET, 5]), "str or bytes"),
    (dict(secret_key=SECRET, same_site="none"), "secure=True"),
    (dict(secret_key=SECRET, same_site="loose"), "same_site"),
    (dict(secret_key=SECRET, cookie_name="bad name"), "token"),
    (dict(secret_key=SECRET, max_age=0), "max_age"),
    (dict(secret_key=SECRET, path="app"), "path"),
    (dict(secret_key=SECRET, serializer=object()), "dumps"),
])
def test_sessions_refuse_bad_configuration(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        SessionMiddleware(**options)


def test_session_dict_tracks_changes():
    s = Session({"a": 1})
    assert not s.modified and s == {"a": 1}
    for change in (lambda d: d.__setitem__("b", 2), lambda d: d.pop("a"), lambda d: d.update(c=3),
                   lambda d: d.setdefault("z", 0), lambda d: d.clear(), lambda d: d.__delitem__("a"),
                   lambda d: d.popitem(), lambda d: d.__ior__({"q": 1})):
        s = Session({"a": 1})
        change(s)
        assert s.modified
    s = Session({"a": 1})
    s.get("a"), s.pop("missing", None), s.setdefault("a", 5), Session().clear()
    assert not s.modified


def test_session_round_trip_and_cookie_attributes():
    app, _ = session_app(max_age=3600, https_only=True, same_site="strict")
    r = run(call(app, "GET", "/s"))
    assert r.json() == {} and "set-cookie" not in r.headers  # nothing changed: no cookie
    r = run(call(app, "POST", "/s?key=user&value=ada"))
    cookie = cookie_of(r)
    attrs = r.headers["set-cookie"]
    assert cookie and "Max-Age=3600" in attrs and "HttpOnly" in attrs and "Secure" in attrs
    assert "SameSite=Strict" in attrs and "Path=/" in attrs
    r = run(call(app, "GET", "/s", {"cookie": f"other=1; session={cookie}; x=y"}))
    assert r.json() == {"user": "ada"} and "set-cookie" not in r.headers
    r = run(call(app, "POST", "/s?key=n&value=2", {"cookie": f"session={cookie}"}))
    assert r.json() == {"user": "ada", "n": "2"}
    r = run(call(app, "DELETE", "/s", {"cookie": f"session={cookie_of(r)}"}))
    assert r.status_code == 204 and cookie_of(r) == "" and "Max-Age=0" in r.headers["set-cookie"]


def test_session_tampered_expired_and_garbage_cookies_read_as_empty():
    app, mw = session_app(max_age=60)
    good = mw.dumps({"user": "ada"})
    payload, ts, sig = good.split(".")
    forged = mw.dumps({"user": "admin"}).split(".")[0] + f".{ts}.{sig}"  # another payload, the old signature
    old = SessionMiddleware(SECRET, max_age=60)
    old.signer.get_timestamp = lambda: int(time.time()) - 120
    expired = old.dumps({"user": "ada"})
    for bad in (forged, expired, good[:-2] + "xx", "garbage", "a.b.c", "", '"' + "=" * 50 + '"'):
        r = run(call(app, "GET", "/s", {"cookie": f"session={bad}"}))
        assert r.status_code == 200 and r.json() == {}, bad
        assert cookie_of(r) == "", bad  # the bad cookie is deleted
    assert run(call(app, "GET", "/s", {"cookie": f"session={good}"})).json() == {"user": "ada"}


def test_session_assigned_a_new_dict_is_saved():
    app, mw = session_app()

    @app.post("/replace")
    async def replace(request: Request):
        request.session = {"user": "bob"}

    @app.post("/drop")
    async def drop(request: Request):
        request.session = None

    with TestClient(app) as c:
        r = c.post("/replace")
        assert mw.loads(cookie_of(r)) == {"user": "bob"}
        assert c.get("/s").json() == {"user": "bob"}
        r = c.post("/drop")
        assert cookie_of(r) == "" and "Max-Age=0" in r.headers["set-cookie"]
        assert c.get("/s").json() == {}


def test_session_key_rotation():
    old_key, new_key = "o" * 32, "n" * 32
    cookie = SessionMiddleware(old_key).dumps({"user": "ada"})
    app, mw = session_app(SessionMiddleware([new_key, old_key]))
    assert run(call(app, "GET", "/s", {"cookie": f"session={cookie}"})).json() == {"user": "ada"}
    r = run(call(app, "POST", "/s?key=n&value=1", {"cookie": f"session={cookie}"}))
    resigned = cookie_of(r)
    assert SessionMiddleware(new_key).loads(resigned) == {"user": "ada", "n": "1"}  # signed with the newest
    assert SessionMiddleware(old_key).loads(resigned) is None
    app, _ = session_app(SessionMiddleware(new_key))  # the old key retired: its cookies are void
    assert run(call(app, "GET", "/s", {"cookie": f"session={cookie}"})).json() == {}


def test_session_too_large_is_a_clear_500(caplog):
    app, _ = session_app()
    with caplog.at_level(logging.WARNING, logger="aquilia_app.sessions"):
        r = run(call(app, "POST", "/huge"))
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
    assert "SessionTooLarge" in r.json()["detail"] and str(MAX_SESSION_COOKIE) in r.json()["detail"]
    assert any("session cookie would be" in rec.getMessage() for rec in caplog.records)
    r = run(call(app, "POST", "/unserializable"))
    assert r.status_code == 500 and "cannot be serialized" in r.json()["detail"]


def test_session_cookie_at_the_limit_is_written():
    _, mw = session_app()
    # base64 grows 4 bytes per 3: the largest payload that fits
    n = max(i for i in range(0, 3200) if len("session=") + len(mw.dumps({"b": "x" * i})) <= MAX_SESSION_COOKIE)
    assert len(mw._cookie(Session({"b": "x" * n})).split(";")[0]) <= MAX_SESSION_COOKIE
    with pytest.raises(Exception, match="over the 4093"):
        mw._cookie(Session({"b": "x" * (n + 3)}))


# == request ids ===========================================================================================
def rid_app(**options):
    app = app_with(RequestIdMiddleware(**options))
    seen = []

    @app.get("/rid")
    async def rid():
        seen.append(current_request_id())
        logging.getLogger("rid-test").warning("inside")
        return {"request_id": current_request_id()}

    return app, seen


def test_request_id_generated_echoed_or_refused():
    app, seen = rid_app()
    r = run(call(app, "GET", "/rid"))
    rid = r.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", rid) and r.json()["request_id"] == rid
    assert run(call(app, "GET", "/rid", {"x-request-id": "abc-123"})).headers["x-request-id"] == "abc-123"
    ok = "a" * 200
    assert run(call(app, "GET", "/rid", {"x-request-id": ok})).headers["x-request-id"] == ok
    for bad in ("a" * 201, "has space", "tab\there", "ünïcode".encode(), ""):
        r = run(call(app, "GET", "/rid", {"x-request-id": bad}))
        assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"]), bad
    assert current_request_id() is None  # reset after each request
    assert len(seen) == 8


def test_request_id_options_and_logs():
    ids = iter(["id-1", "id-2"])
    app, _ = rid_app(header="X-Trace", generator=lambda: next(ids), trust_incoming=False, max_length=10)
    handler = logging.Handler()
    records = []
    handler.emit = records.append
    handler.addFilter(RequestIdLogFilter())
    logger = logging.getLogger("rid-test")
    logger.addHandler(handler)
    try:
        r = run(call(app, "GET", "/rid", {"x-trace": "client-chosen"}))
    finally:
        logger.removeHandler(handler)
    assert r.headers["x-trace"] == "id-1" and r.json() == {"request_id": "id-1"}
    assert records and records[0].request_id == "id-1"
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "outside", None, None)
    RequestIdLogFilter().filter(rec)
    assert rec.request_id == "-"
    bad, _ = rid_app(generator=lambda: "bad id")
    r = run(call(bad, "GET", "/rid"))
    assert r.status_code == 500 and "request id generator" in r.json()["detail"]
    for options in (dict(header="x bad"), dict(generator="nope"), dict(max_length=0), dict(max_length=5000)):
        with pytest.raises((ValueError, TypeError)):
            RequestIdMiddleware(**options)


# == trusted hosts ==========================================================================================
@pytest.mark.parametrize("value, expected", [
    ("example.com", ("example.com", "")), ("Example.COM:8080", ("example.com", ":8080")),
    ("example.com.", ("example.com", "")), ("[::1]:80", ("[::1]", ":80")), ("[2001:db8::1]", ("[2001:db8::1]", "")),
    ("127.0.0.1:1", ("127.0.0.1", ":1")), ("ex ample.com", None), ("example.com:port", None),
    ("example.com:", None), ("[::1", None), ("[zz]", None), ("a/b", None), ("", None), ("exa_mple.com", ("exa_mple.com", "")),
    ("example.com:123456", None), ("-bad.com", None), ("user@example.com", None),
])
def test_split_host(value, expected):
    assert split_host(value) == expected


def host_app(**options):
    return app_with(TrustedHostMiddleware(**options))


def test_trusted_hosts():
    app = host_app(allowed_hosts=["example.com", "*.example.com", "[::1]", "10.0.0.1"])
    for host in ("example.com", "EXAMPLE.com:8443", "api.example.com", "a.b.example.com", "example.com.",
                 "[::1]:8000", "10.0.0.1"):
        assert run(call(app, "GET", "/json", {"host": host})).status_code == 200, host
    for host in ("evil.com", "example.com.evil.com", "notexample.com", "[::2]", "example.com:x", "exam ple.com"):
        r = run(call(app, "GET", "/json", {"host": host}))
        assert r.status_code == 400 and r.json()["detail"] == "Invalid host header", host
        assert r.headers["content-type"] == "application/problem+json"
    status, _, body = run(raw_asgi(app, "/json", [("host", "example.com"), ("host", "evil.com")]))
    assert status == 400  # two Hosts (RFC 9112 3.2)
    status, _, _ = run(raw_asgi(app, "/json", []))
    assert status == 400  # none
    wildcard_only = host_app(allowed_hosts=["*.example.com"])
    assert run(call(wildcard_only, "GET", "/json", {"host": "example.com"})).status_code == 400
    assert run(call(host_app(allowed_hosts=["*"]), "GET", "/json", {"host": "any.thing"})).status_code == 200


def test_www_redirect():
    app = host_app(allowed_hosts=["www.example.com"], www_redirect=True)
    r = run(call(app, "GET", "/json?a=1&b=%20", {"host": "example.com:8000"}))
    assert r.status_code == 301 and r.headers["location"] == "http://www.example.com:8000/json?a=1&b=%20"
    r = run(call(app, "POST", "/json", {"host": "example.com"}))
    assert r.status_code == 308 and r.headers["location"] == "http://www.example.com/json"
    # encoded characters of the path stay encoded: "?" is no query, "%2541" is no "%41"
    for path in ("/a%3Fb?x=1", "/%2541", "/caf%C3%A9", "/a%20b"):
        r = run(call(app, "GET", path, {"host": "example.com"}))
        assert r.status_code == 301 and r.headers["location"] == "http://www.example.com" + path, path
    assert run(call(app, "GET", "/json", {"host": "other.com"})).status_code == 400
    no_redirect = host_app(allowed_hosts=["www.example.com"])
    assert run(call(no_redirect, "GET", "/json", {"host": "example.com"})).status_code == 400


@pytest.mark.parametrize("hosts", [["https://example.com"], ["example.com:80"], ["example.com/x"], [],
                                   "example.com", ["*.[::1]"], ["ex ample"]])
def test_trusted_hosts_refuse_bad_configuration(hosts):
    with pytest.raises((ValueError, TypeError)):
        TrustedHostMiddleware(allowed_hosts=hosts)


def test_websockets_see_sessions_trusted_hosts_and_proxy_headers():
    """As in Starlette (and uvicorn's proxy headers): a WebSocket reads the session of its cookie, a
    handshake for a host that is not allowed is refused, and a trusted proxy's headers apply."""
    from aquilia_app import WebSocket
    from aquilia_app.testclient import WebSocketRejected

    mw = SessionMiddleware(SECRET)
    app = App()
    app.add_middleware(ProxyHeadersMiddleware(trusted_proxies="*"), priority=5)
    app.add_middleware(TrustedHostMiddleware(allowed_hosts=["example.com"]), priority=10)
    app.add_middleware(mw, priority=20)

    @app.websocket("/ws")
    async def ws_route(ws: WebSocket):
        await ws.accept()
        await ws.send_json({"session": dict(ws.session), "client": ws.client.host, "url": ws.url})
        await ws.close()

    cookie = {"cookie": f"session={mw.dumps({'user': 'ada'})}"}
    with TestClient(app, base_url="http://example.com") as c:
        with c.websocket_connect("/ws", headers={**cookie, "x-forwarded-for": "203.0.113.7",
                                                 "x-forwarded-proto": "https"}) as s:
            assert s.receive_json() == {"session": {"user": "ada"}, "client": "203.0.113.7",
                                        "url": "wss://example.com/ws"}
        with c.websocket_connect("/ws") as s:
            assert s.receive_json()["session"] == {}
    with TestClient(app, base_url="http://evil.example") as c:
        with pytest.raises(WebSocketRejected) as info:
            with c.websocket_connect("/ws", headers=cookie):
                pass
        assert info.value.status == 400 and info.value.json()["detail"] == "Invalid host header"


# == function middleware (FastAPI's @app.middleware("http")) ================================================
def test_function_middleware_as_in_fastapi():
    from aquilia_app import FunctionMiddleware
    from aquilia_app.testclient import TestClient

    app = App(debug=True)

    @app.middleware("http")
    async def timing(request, call_next):
        request.state.seen = "outer"
        response = await call_next(request)
        return response.with_headers([("x-outer", "1")])

    @app.middleware("http", priority=200)  # inner: runs after the outer one
    async def refuse_bots(request, call_next):
        if request.header("user-agent") == "bot":
            return Response.text("no bots", 403)
        return await call_next(request)

    async def tag(request, call_next):
        return (await call_next(request)).with_headers([("x-route", "1")])

    @app.get("/who")
    async def who(request: Request):
        return {"seen": request.state.seen}

    @app.get("/tagged", middleware=[FunctionMiddleware(tag)])
    async def tagged():
        return "t"

    with TestClient(app) as client:
        r = client.get("/who")
        assert (r.json(), r.headers["x-outer"]) == ({"seen": "outer"}, "1")
        r = client.get("/who", headers={"user-agent": "bot"})
        assert (r.status_code, r.text, r.headers["x-outer"]) == (403, "no bots", "1")
        assert client.get("/tagged").headers["x-route"] == "1"
        assert "x-route" not in client.get("/who").headers
    async def one_argument(request):
        return None

    for bad in (lambda request, call_next: None, one_argument):  # not async; not (request, call_next)
        with pytest.raises(TypeError, match="async def taking"):
            FunctionMiddleware(bad)
    with pytest.raises(ValueError, match="'http'"):
        App().middleware("websocket")


# == proxy headers =========================================================================================
def _through_proxy(peer: str, headers: dict, **options) -> dict:
    app = App()
    app.add_middleware(ProxyHeadersMiddleware(**options))

    @app.get("/who")
    async def who(request: Request):
        c = request.client
        return {"client": [c.host, c.port], "url": request.url, "base": request.base_url}

    async def go():
        transport = httpx.ASGITransport(app, client=(peer, 4711))
        async with httpx.AsyncClient(transport=transport, base_url="http://shop.example") as client:
            return (await client.get("/who", headers=headers)).json()

    return run(go())


def test_a_trusted_proxy_sets_the_client_and_the_scheme():
    got = _through_proxy("127.0.0.1", {"x-forwarded-for": "203.0.113.7", "x-forwarded-proto": "https"})
    assert got == {"client": ["203.0.113.7", None], "url": "https://shop.example/who", "base": "https://shop.example/"}
    # a chain: the rightmost address that is not a trusted proxy; what a client wrote at the left is ignored
    got = _through_proxy("10.0.0.2", {"x-forwarded-for": "6.6.6.6, 203.0.113.7, 10.0.0.9"},
                         trusted_proxies=["10.0.0.0/8"])
    assert got["client"] == ["203.0.113.7", None]
    got = _through_proxy("10.0.0.2", {"x-forwarded-for": "10.0.0.7, 10.0.0.9"}, trusted_proxies="10.0.0.0/8, ::1")
    assert got["client"] == ["10.0.0.7", None]  # every hop trusted: the first
    got = _through_proxy("198.51.100.1", {"x-forwarded-for": "1.2.3.4"}, trusted_proxies="*")
    assert got["client"] == ["1.2.3.4", None]


def test_an_untrusted_peer_or_a_strange_scheme_changes_nothing():
    got = _through_proxy("198.51.100.1", {"x-forwarded-for": "203.0.113.7", "x-forwarded-proto": "https"})
    assert got == {"client": ["198.51.100.1", 4711], "url": "http://shop.example/who", "base": "http://shop.example/"}
    got = _through_proxy("127.0.0.1", {"x-forwarded-proto": "javascript"})
    assert got["url"] == "http://shop.example/who" and got["client"] == ["127.0.0.1", 4711]
    got = _through_proxy("127.0.0.1", {"x-forwarded-proto": "http, HTTPS"})
    assert got["url"] == "https://shop.example/who"  # the last proxy's word


@pytest.mark.parametrize("trusted", [["localhost"], ["10.0.0.0/33"], "10.0.0.1, nope"])
def test_proxy_headers_refuse_bad_configuration(trusted):
    with pytest.raises(ValueError, match="trusted_proxies"):
        ProxyHeadersMiddleware(trusted_proxies=trusted)


# == timeouts ==============================================================================================
def test_timeout_answers_504_and_fails_the_request_scope():
    events = []

    class Tx:
        pass

    async def tx():
        try:
            yield Tx()
        except BaseException as e:  # the scope closes as failed: roll back
            events.append(("rollback", type(e).__name__))
            raise
        else:
            events.append(("commit",))

    c = Container()
    c.register(Tx, tx, scope=REQUEST)
    app = app_with(TimeoutMiddleware(0.1), container=c)

    @app.get("/tx-slow")
    async def tx_slow(t: Tx):
        await asyncio.sleep(5)

    @app.get("/tx-fast")
    async def tx_fast(t: Tx):
        return {"ok": True}

    t0 = time.monotonic()
    r = run(call(app, "GET", "/tx-slow"))
    assert r.status_code == 504 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == "the request was not handled within 0.1 s" and time.monotonic() - t0 < 2
    assert run(call(app, "GET", "/tx-fast")).json() == {"ok": True}
    assert events == [("rollback", "TimeoutError"), ("commit",)]


def test_timeout_drops_the_background_tasks_of_the_cancelled_handler():
    # README: "a handler that raises drops the tasks it added (as FastAPI)"; a handler cut off by
    # the time limit never returned its response either, and its DI scope was rolled back
    from aquilia_app import BackgroundTasks

    ran = []
    app = app_with(TimeoutMiddleware(0.1))

    @app.get("/bg-slow")
    async def bg_slow(tasks: BackgroundTasks):
        tasks.add_task(ran.append, "slow")
        await asyncio.sleep(5)

    @app.get("/bg-fast")
    async def bg_fast(tasks: BackgroundTasks):
        tasks.add_task(ran.append, "fast")
        return {"ok": True}

    with TestClient(app) as client:
        assert client.get("/bg-slow").status_code == 504
        assert client.get("/bg-fast").json() == {"ok": True}
    assert ran == ["fast"]


def test_timeout_does_not_bound_a_stream_body_nor_take_other_timeouts():
    class RaisesTimeout(Middleware):
        async def __call__(self, request, call_next):
            if request.path == "/inner-timeout":
                raise TimeoutError("a timeout of the inner code")
            return await call_next(request)

    app = app_with((TimeoutMiddleware(0.1), 1), (RaisesTimeout(), 2))

    @app.get("/slow-stream")
    async def slow_stream():
        async def gen():
            yield "first\n"
            await asyncio.sleep(0.3)  # longer than the limit: the body is not bounded by it
            yield "second\n"

        return StreamingResponse(gen())

    r = run(call(app, "GET", "/slow-stream"))
    assert r.status_code == 200 and r.text == "first\nsecond\n"
    r = run(call(app, "GET", "/inner-timeout"))
    assert r.status_code == 500 and "a timeout of the inner code" in r.json()["detail"]


@pytest.mark.parametrize("seconds", [0, -1, "1", True, float("nan"), float("inf")])
def test_timeout_refuses_bad_configuration(seconds):
    with pytest.raises(ValueError):
        TimeoutMiddleware(seconds)


# == the chain's order ======================================================================================
def test_priority_orders_the_chain():
    def build(rid_prio, host_prio):
        app = app_with((TrustedHostMiddleware(allowed_hosts=["t"]), host_prio),
                       (RequestIdMiddleware(), rid_prio))
        return app

    outer_id = build(1, 2)  # the id is given before the host is checked: the 400 carries it
    r = run(call(outer_id, "GET", "/json", {"host": "evil.com"}))
    assert r.status_code == 400 and "x-request-id" in r.headers
    inner_id = build(2, 1)  # the host check answers first: the id middleware never runs
    r = run(call(inner_id, "GET", "/json", {"host": "evil.com"}))
    assert r.status_code == 400 and "x-request-id" not in r.headers
    assert [type(m).__name__ for m in inner_id.middleware.order()] == ["TrustedHostMiddleware", "RequestIdMiddleware"]


class _Tag(Middleware):
    """Adds ``x-tag: <name>`` to the answers of the routes it wraps."""

    def __init__(self, name):
        self.name = name

    async def __call__(self, request, call_next):
        response = await call_next(request)
        response.add_header("x-tag", self.name)
        return response


def test_route_middleware_on_app_and_controller_routes_only():
    from aquilia_app import Controller, controllers

    app = App(debug=True)

    @app.get("/tagged", middleware=[_Tag("app")])
    async def tagged():
        return {"ok": 1}

    @app.get("/plain")
    async def plain():
        return {"ok": 2}

    @app.controller
    class Items(Controller):
        prefix = "/items"

        @controllers.get("/{item_id:int}", middleware=[_Tag("outer"), _Tag("inner")])
        async def one(self, item_id: int):
            return {"id": item_id}

        @controllers.delete("/{item_id:int}")
        async def remove(self, item_id: int):
            return {"deleted": item_id}

    r = run(call(app, "GET", "/tagged"))
    assert r.json() == {"ok": 1} and r.headers.get_list("x-tag") == ["app"]
    assert "x-tag" not in run(call(app, "GET", "/plain")).headers
    r = run(call(app, "GET", "/items/7"))
    # outermost first: the inner one decorates the answer before the outer one sees it
    assert r.json() == {"id": 7} and r.headers.get_list("x-tag") == ["inner", "outer"]
    r = run(call(app, "DELETE", "/items/7"))
    assert r.json() == {"deleted": 7} and "x-tag" not in r.headers


def test_route_middleware_must_be_native_instances():
    from aquilia_app import controllers

    app = App()
    for declare in (app.get, controllers.get, app.post, controllers.post):
        with pytest.raises(TypeError, match="Middleware instances"):
            declare("/x", middleware=[CORSMiddleware])  # the class, not an instance


def test_cors_outside_timeout_and_compression():
    app = app_with((TimeoutMiddleware(0.1), 30), (CompressionMiddleware(), 20), (CORSMiddleware(allow_origins=[ORIGIN]), 10))
    r = run(call(app, "GET", "/slow", {"origin": ORIGIN}))
    assert r.status_code == 504 and r.headers["access-control-allow-origin"] == ORIGIN  # the browser can read it
    r = run(call(app, "GET", "/text", {"origin": ORIGIN, "accept-encoding": "gzip"}))
    assert r.headers["content-encoding"] == "gzip" and r.headers["access-control-allow-origin"] == ORIGIN
    assert sorted(v.strip() for v in r.headers["vary"].split(",")) == ["Accept-Encoding", "Origin"]


# == on the wire: the real server ============================================================================
@pytest.fixture(scope="module", params=["rsgi", "asgi"])
def server(request):
    with running_server("--app", "native_mw_app:app", "--interface", request.param) as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield port, client


def raw_body(client, path, headers) -> tuple:
    """(response, the body bytes as sent: not decoded by httpx)."""
    with client.stream("GET", path, headers=headers) as r:
        return r, b"".join(r.iter_raw())


def test_wire_cors(server):
    _, c = server
    r = c.options("/session", headers=preflight(method="PUT", headers="x-token"))
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == native_mw_app.ORIGIN
    assert r.headers["access-control-allow-methods"] == "GET, POST, PUT"
    assert r.headers["access-control-allow-headers"] == "x-token"
    assert r.headers["access-control-allow-credentials"] == "true"
    r = c.options("/session", headers=preflight(method="DELETE"))
    assert r.status_code == 400 and "DELETE" in r.json()["detail"]
    r = c.get("/small", headers={"origin": native_mw_app.ORIGIN})
    assert r.headers["access-control-allow-origin"] == native_mw_app.ORIGIN and r.headers["vary"] == "Origin"
    assert r.headers["access-control-expose-headers"] == "x-request-id"
    r = c.get("/small", headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers and r.json() == {"small": True}


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_wire_compression_round_trip(server, coding):
    _, c = server
    r, data = raw_body(c, "/page", {"accept-encoding": coding})
    assert r.status_code == 200 and r.headers["content-encoding"] == coding
    assert int(r.headers["content-length"]) == len(data) < len(native_mw_app.PAGE) // 4
    assert decode(coding, data).decode() == native_mw_app.PAGE
    assert r.headers["etag"] == 'W/"page-v1"' and "Accept-Encoding" in r.headers["vary"]
    r, data = raw_body(c, "/image", {"accept-encoding": coding})
    assert "content-encoding" not in r.headers and data.startswith(b"\x89PNG")
    r, data = raw_body(c, "/small", {"accept-encoding": coding})
    assert "content-encoding" not in r.headers and data == b'{"small":true}'


class ChunkedReader:
    """Reads a chunked response from a socket one chunk at a time."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self, n: int = 1) -> None:
        while len(self.buf) < n:
            more = self.sock.recv(65536)
            if not more:
                raise ConnectionError("closed")
            self.buf += more

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill(len(self.buf) + 1)
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def head(self) -> dict:
        while b"\r\n\r\n" not in self.buf:
            self._fill(len(self.buf) + 1)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        return {"status": lines[0], **{k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}}

    def chunk(self) -> bytes:
        size = int(self._line().split(b";")[0], 16)
        self._fill(size + 2)
        data, self.buf = self.buf[:size], self.buf[size + 2:]
        return data


@pytest.mark.parametrize("coding", ["gzip", "br", "zstd"])
def test_wire_stream_is_compressed_and_delivered_progressively(server, coding):
    """The handler's stream waits, after its first chunk, until the client has *decoded* that chunk
    and calls /release: a compressor that buffered would leave the client waiting (timeout)."""
    port, c = server
    token = uuid.uuid4().hex
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET /stream?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: {coding}\r\n\r\n".encode())
        reader = ChunkedReader(s)
        head = reader.head()
        assert head["status"].startswith("HTTP/1.1 200") and head["content-encoding"] == coding
        assert head["transfer-encoding"] == "chunked" and "content-length" not in head
        feed, text = decoder(coding), b""
        while len(text) < len(native_mw_app.CHUNK):
            text += feed(reader.chunk())
        assert text == native_mw_app.CHUNK.encode()  # all of it, before the stream may go on
        assert c.get("/release", params={"token": token}).status_code == 200
        while True:
            data = reader.chunk()
            if not data:
                break
            text += feed(data)
    assert text == (native_mw_app.CHUNK + "last chunk\n").encode()


def test_wire_sessions(server):
    _, c = server
    r = c.post("/session", params={"key": "user", "value": "ada"})
    cookie = cookie_of(r)
    assert r.status_code == 200 and cookie and "Max-Age=60" in r.headers["set-cookie"]
    r = c.get("/session", headers={"cookie": f"session={cookie}"})
    assert r.json() == {"user": "ada"} and "set-cookie" not in r.headers
    payload, ts, sig = cookie.split(".")
    tampered = payload[:-1] + ("A" if payload[-1] != "A" else "B") + f".{ts}.{sig}"
    old = SessionMiddleware(native_mw_app.SECRET, max_age=60)
    old.signer.get_timestamp = lambda: int(time.time()) - 61
    expired = old.dumps({"user": "ada"})
    for bad in (tampered, expired):
        r = c.get("/session", headers={"cookie": f"session={bad}"})
        assert r.status_code == 200 and r.json() == {} and cookie_of(r) == ""
    r = c.delete("/session", headers={"cookie": f"session={cookie}"})
    assert r.status_code == 204 and cookie_of(r) == ""
    r = c.post("/session/huge")
    assert r.status_code == 500 and "SessionTooLarge" in r.json()["detail"]


def test_wire_request_id(server):
    _, c = server
    r = c.get("/rid")
    assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"]) and r.json()["request_id"] == r.headers["x-request-id"]
    r = c.get("/rid", headers={"x-request-id": "trace-42"})
    assert r.headers["x-request-id"] == "trace-42" and r.json()["request_id"] == "trace-42"
    r = c.get("/rid", headers={"x-request-id": "x" * 201})
    assert r.headers["x-request-id"] != "x" * 201 and len(r.headers["x-request-id"]) == 32


def test_wire_trusted_hosts(server):
    port, c = server
    r = c.get("/small", headers={"host": "api.example.com"})
    assert r.status_code == 200
    r = c.get("/small", headers={"host": "evil.example"})
    assert r.status_code == 400 and r.json()["detail"] == "Invalid host header"
    assert "x-request-id" in r.headers  # request ids (priority 1) run outside the host check (2)
    r = c.get("/small?x=1", headers={"host": f"example.org:{port}"})
    assert r.status_code == 301 and r.headers["location"] == f"http://www.example.org:{port}/small?x=1"


def test_wire_timeout(server):
    _, c = server
    t0 = time.monotonic()
    r = c.get("/slow", headers={"origin": native_mw_app.ORIGIN})
    assert r.status_code == 504 and r.headers["content-type"] == "application/problem+json"
    assert time.monotonic() - t0 < native_mw_app.TIMEOUT * 5
    assert r.headers["access-control-allow-origin"] == native_mw_app.ORIGIN and "x-request-id" in r.headers
    assert c.get("/healthz").json() == {"status": "ok"}  # the server is fine afterwards
