"""FileResponse and StaticFiles on the wire (granian RSGI, granian ASGI, uvicorn): validators, 304,
ranges (206/416), If-Range, HEAD, downloads, missing and vanishing files, html mode; plus the pure
helpers (range parsing, Content-Disposition, media types) and a hypothesis run over the conditional
headers."""
import os
import socket
import time
from email.utils import formatdate

import pytest
from hypothesis import given, settings, strategies as st

from files_app import BIG_SIZE, SERVERS, big_bytes, make_tree, serving
from server_util import read_response

from aquilia_app import App, Request
from aquilia_app.exceptions import NotFound
from aquilia_app.files import (UNSATISFIABLE, FileResponse, StaticFiles, content_disposition, guess_media_type,
                               parse_range)
from aquilia_app.testclient import TestClient

BIG = big_bytes()


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("files")
    make_tree(str(base))
    with serving(request.param, str(base)) as (port, client):
        yield port, client, base, request.param


# -- whole files and validators ---------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/file", "/file-plain"])
def test_whole_file(server, path):
    _, c, base, _ = server
    r = c.get(path)
    assert r.status_code == 200 and r.content == BIG
    assert r.headers["content-length"] == str(BIG_SIZE) and "transfer-encoding" not in r.headers
    assert r.headers["content-type"] == "application/octet-stream" and r.headers["accept-ranges"] == "bytes"
    st_ = os.stat(base / "big.bin")
    assert r.headers["etag"] == f'W/"{st_.st_size:x}-{st_.st_mtime_ns:x}"'
    assert r.headers["last-modified"] == formatdate(int(st_.st_mtime), usegmt=True)


# /file-plain: FileResponse(path) without request=, as Starlette's is written: the app negotiates for it
BOTH = pytest.mark.parametrize("path", ["/file", "/file-plain"])


@BOTH
def test_if_none_match(server, path):
    _, c, _, _ = server
    etag = c.get(path).headers["etag"]
    strong_form = etag[2:]  # weak comparison: W/"x" and "x" match
    for value in (etag, strong_form, f'"other", {etag}', "*"):
        r = c.get(path, headers={"if-none-match": value})
        assert r.status_code == 304 and r.content == b"", value
        assert r.headers["etag"] == etag and "last-modified" in r.headers
    r = c.get(path, headers={"if-none-match": '"other"'})
    assert r.status_code == 200 and len(r.content) == BIG_SIZE


def test_if_modified_since(server):
    _, c, _, _ = server
    modified = c.get("/file").headers["last-modified"]
    assert c.get("/file", headers={"if-modified-since": modified}).status_code == 304
    assert c.get("/file", headers={"if-modified-since": "Thu, 01 Jan 1970 00:00:00 GMT"}).status_code == 200
    assert c.get("/file", headers={"if-modified-since": "not a date"}).status_code == 200
    future = formatdate(time.time() + 86400, usegmt=True)  # later than now: invalid, ignored
    assert c.get("/file", headers={"if-modified-since": future}).status_code == 200
    # If-None-Match decides when both are present
    r = c.get("/file", headers={"if-none-match": '"other"', "if-modified-since": modified})
    assert r.status_code == 200


# -- ranges -------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,start,end", [
    ("bytes=10-19", 10, 20), ("bytes=300000-", 300000, BIG_SIZE), ("bytes=-100", BIG_SIZE - 100, BIG_SIZE),
    ("bytes=0-99999999999", 0, BIG_SIZE), ("bytes=-999999999", 0, BIG_SIZE), ("Bytes = 5-5", 5, 6),
    ("bytes=65530-131080", 65530, 131081),  # across chunk boundaries
])
@BOTH
def test_single_range(server, spec, start, end, path):
    _, c, _, _ = server
    r = c.get(path, headers={"range": spec})
    assert r.status_code == 206 and r.content == BIG[start:end]
    assert r.headers["content-range"] == f"bytes {start}-{end - 1}/{BIG_SIZE}"
    assert r.headers["content-length"] == str(end - start)


@pytest.mark.parametrize("spec", [f"bytes={BIG_SIZE}-", f"bytes={BIG_SIZE + 5}-{BIG_SIZE + 9}", "bytes=-0"])
@BOTH
def test_unsatisfiable_range(server, spec, path):
    _, c, _, _ = server
    r = c.get(path, headers={"range": spec})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{BIG_SIZE}"
    assert r.headers["content-type"] == "application/problem+json" and r.json()["status"] == 416


@pytest.mark.parametrize("spec", ["bytes=0-1,5-9", "bytes=5-3", "items=0-5", "bytes=abc", "bytes=-", "bytes=+1-2",
                                  "bytes=0-" + "9" * 40, "bytes=\u0661-2"])
def test_ignored_range_gives_the_whole_file(server, spec):
    _, c, _, _ = server
    r = c.get("/file", headers={"range": spec.encode("utf-8")})
    assert r.status_code == 200 and len(r.content) == BIG_SIZE and "content-range" not in r.headers


def test_several_ranges_on_the_wire(server):
    _, c, _, _ = server
    r = c.get("/file", headers={"range": "bytes=100-199, 0-99,150-300"})  # overlapping and touching: one range
    assert r.status_code == 206 and r.content == BIG[:301]
    assert r.headers["content-range"] == f"bytes 0-300/{BIG_SIZE}"
    r = c.get("/file", headers={"range": f"bytes={BIG_SIZE}-,{BIG_SIZE + 10}-{BIG_SIZE + 20}"})
    assert r.status_code == 416 and r.headers["content-range"] == f"bytes */{BIG_SIZE}"


def test_preconditions_on_the_wire(server):
    _, c, _, _ = server
    modified = c.get("/file").headers["last-modified"]
    for h in ({"if-match": '"nope"'}, {"if-unmodified-since": "Thu, 01 Jan 1970 00:00:00 GMT"}):
        r = c.get("/file", headers=h)
        assert r.status_code == 412 and r.json()["status"] == 412, h
    r = c.get("/file", headers={"if-match": "*", "if-unmodified-since": modified, "range": "bytes=0-3"})
    assert r.status_code == 206 and r.content == BIG[:4]


def test_if_range(server):
    _, c, _, _ = server
    first = c.get("/file")
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    r = c.get("/file", headers={"range": "bytes=0-9", "if-range": modified})
    assert r.status_code == 206 and r.content == BIG[:10]
    r = c.get("/file", headers={"range": "bytes=0-9", "if-range": etag})  # weak: never a strong match
    assert r.status_code == 200 and len(r.content) == BIG_SIZE
    r = c.get("/file", headers={"range": "bytes=0-9", "if-range": "Thu, 01 Jan 1970 00:00:00 GMT"})
    assert r.status_code == 200 and len(r.content) == BIG_SIZE


def test_empty_file_ranges(server):
    _, c, _, _ = server
    r = c.get("/static/empty.txt")
    assert r.status_code == 200 and r.content == b"" and r.headers["content-length"] == "0"
    r = c.get("/static/empty.txt", headers={"range": "bytes=0-"})
    assert r.status_code == 416 and r.headers["content-range"] == "bytes */0"


# -- HEAD, downloads, missing files ------------------------------------------------------------------
@BOTH
def test_head(server, path):
    port, c, _, _ = server
    r = c.head(path)
    assert r.status_code == 200 and r.content == b"" and r.headers["content-length"] == str(BIG_SIZE)
    assert r.headers["accept-ranges"] == "bytes" and "etag" in r.headers
    r = c.head(path, headers={"range": "bytes=0-9"})  # Range is for GET only
    assert r.status_code == 200 and r.headers["content-length"] == str(BIG_SIZE) and "content-range" not in r.headers
    assert c.head(path, headers={"if-none-match": r.headers["etag"]}).status_code == 304
    # on the wire: the headers and nothing else; the connection stays usable
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"HEAD /static/hello.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(65536)
            assert chunk, head
            head += chunk
        assert head.endswith(b"\r\n\r\n") and b"content-length: 13\r\n" in head.lower()
        s.sendall(b"GET /static/hello.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        status, _, body = read_response(s)
        assert status == 200 and body == b"hello static\n"


def test_download_filename(server):
    _, c, _, _ = server
    r = c.get("/download")
    assert r.status_code == 200 and r.content == b"hello static\n"
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"r_sum_ \\\"final\\\".txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.txt")


def test_missing_and_vanishing_files_are_404(server):
    _, c, _, kind = server
    r = c.get("/missing-file")
    assert r.status_code == 404 and r.json()["status"] == 404
    r = c.get("/vanishing-file")  # stat'ed, then deleted before the send
    assert r.status_code == 404
    if kind == "uvicorn":  # granian (RSGI response_file, ASGI pathsend) answers a plain-text 404 itself
        assert r.headers["content-type"] == "application/problem+json"


def test_client_leaving_mid_file_leaves_the_server_healthy(server):
    port, c, _, _ = server
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /file HTTP/1.1\r\nHost: t\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
    assert c.get("/file", headers={"range": "bytes=0-3"}).content == BIG[:4]


# -- StaticFiles behaviour (the traversal attacks are in test_static_fuzz.py) -------------------------
def test_static_files(server):
    _, c, _, _ = server
    r = c.get("/static/hello.txt")
    assert r.status_code == 200 and r.content == b"hello static\n"
    assert r.headers["content-type"] == "text/plain; charset=utf-8" and "cache-control" not in r.headers
    assert c.get("/static/hello.txt", headers={"if-none-match": r.headers["etag"]}).status_code == 304
    r = c.get("/static/hello.txt", headers={"range": "bytes=-7"})
    assert r.status_code == 206 and r.content == b"static\n"
    assert c.get("/static/sub/data.json").headers["content-type"] == "application/json"
    assert c.get("/static/link-in").content == b"hello static\n"  # a symlink that stays inside
    assert c.get("/static/.hidden").content == b"dot file"
    assert c.get("/static/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9.txt").content == b"unicode name"
    assert c.get("/static/%252e%252e").content == b"a file named %2e%2e"  # decoded once, never twice


@pytest.mark.parametrize("path", ["/static/sub", "/static/sub/", "/static/emptydir", "/static/nope.txt",
                                  "/static/hello.txt/", "/static/fifo", "/static/sub//data.json",
                                  "/site/emptydir/"])
def test_static_not_found(server, path):
    _, c, _, _ = server
    r = c.get(path)
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"


def test_static_name_holding_a_percent_escape(server, tmp_path):
    """A file named ``%2e%2e`` is reached by ``%252e%252e`` on every server and in process (the TestClient
    decoded the path twice and answered 404)."""
    _, c, base, _ = server
    r = c.get("/static/%252e%252e")
    assert (r.status_code, r.content) == (200, b"a file named %2e%2e")
    make_tree(str(tmp_path))
    app = App()
    app.mount("/static", StaticFiles(str(tmp_path / "public")))
    with TestClient(app) as local:
        r = local.get("/static/%252e%252e")
        assert (r.status_code, r.content) == (200, b"a file named %2e%2e")


def test_static_html_mode(server):
    _, c, _, _ = server
    r = c.get("/site/sub/")
    assert r.status_code == 200 and r.content == b"<h1>sub index</h1>"
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["cache-control"] == "public, max-age=60"
    r = c.get("/site/sub")
    assert r.status_code == 307 and r.headers["location"] == "/site/sub/"
    r = c.get("/site/sub?a=1&b=%C3%A9")  # the query string survives the redirect
    assert r.status_code == 307 and r.headers["location"] == "/site/sub/?a=1&b=%C3%A9"
    assert c.get("/site/sub/data.json").headers["cache-control"] == "public, max-age=60"


# -- in process (TestClient): conditions, several ranges, html mode, files changed under us ------------
@pytest.fixture()
def local(tmp_path):
    """A TestClient over an app serving ``tmp_path/pub`` and the file ``tmp_path/pub/a.txt``."""
    pub = tmp_path / "pub"
    (pub / "sub").mkdir(parents=True)
    (pub / "a.txt").write_bytes(b"0123456789")
    (pub / "sub" / "index.html").write_bytes(b"<p>sub</p>")
    app = App()
    app.mount("/site", StaticFiles(pub, html=True, max_age=60))
    app.mount("/plain", StaticFiles(pub))
    swap = {}

    @app.get("/a")
    async def a(request: Request):
        resp = FileResponse(pub / "a.txt", request=request)
        if "then" in swap:  # the file changes after the stat, before the send
            swap.pop("then")()
        return resp

    with TestClient(app) as client:
        yield client, pub, swap


@pytest.mark.parametrize("spec,status,body,content_range", [
    ("bytes=0-1,2-3", 206, b"0123", "bytes 0-3/10"),  # touching
    ("bytes=5-9, 0-6", 206, b"0123456789", "bytes 0-9/10"),  # overlapping, out of order
    ("bytes=0-1,,2-3", 206, b"0123", "bytes 0-3/10"),  # an empty list element
    ("bytes=2-3,20-", 206, b"23", "bytes 2-3/10"),  # the part past the end is dropped
    ("bytes=20-,30-40,-0", 416, None, "bytes */10"),  # nothing overlaps the file
    ("bytes=0-1,5-6", 200, b"0123456789", None),  # apart: would take multipart, the whole file instead
    ("bytes=0-1,3-2", 200, b"0123456789", None),  # one invalid spec: the header is ignored
])
def test_several_ranges(local, spec, status, body, content_range):
    c, _, _ = local
    r = c.get("/a", headers={"range": spec})
    assert r.status_code == status and r.headers.get("content-range") == content_range
    if body is not None:
        assert r.content == body and r.headers["content-length"] == str(len(body))


def test_if_match_and_if_unmodified_since(local):
    c, _, _ = local
    first = c.get("/a")
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    for h in ({"if-match": '"other"'}, {"if-match": etag},  # If-Match compares strongly: a weak tag never matches
              {"if-unmodified-since": "Thu, 01 Jan 1970 00:00:00 GMT"},
              {"if-match": '"x"', "if-none-match": etag}):  # 412 is decided before 304
        r = c.get("/a", headers=h)
        assert r.status_code == 412 and r.headers["content-type"] == "application/problem+json", h
        assert c.head("/a", headers=h).status_code == 412
    for h in ({"if-match": "*"}, {"if-unmodified-since": modified}, {"if-unmodified-since": "not a date"},
              {"if-match": "*", "if-unmodified-since": "Thu, 01 Jan 1970 00:00:00 GMT"}):  # If-Match wins
        r = c.get("/a", headers=h)
        assert r.status_code == 200 and r.content == b"0123456789", h
    assert c.get("/a", headers={"if-match": "*", "if-none-match": etag}).status_code == 304


def test_static_html_mode_404_page_and_redirect_query(local):
    c, pub, _ = local
    assert c.get("/site/nope.txt").headers["content-type"] == "application/problem+json"  # no 404.html yet
    (pub / "404.html").write_bytes(b"<h1>gone</h1>")
    for path in ("/site/nope.txt", "/site/sub/nope/", "/site/a.txt/", "/site/sub//a.txt"):
        r = c.get(path)
        assert r.status_code == 404 and r.content == b"<h1>gone</h1>", path
        assert r.headers["content-type"] == "text/html; charset=utf-8" and "cache-control" not in r.headers
    r = c.get("/site/nope", headers={"range": "bytes=0-1", "if-none-match": "*"})  # no negotiation on a 404
    assert r.status_code == 404 and r.content == b"<h1>gone</h1>"
    r = c.get("/plain/nope.txt")  # only in html mode
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    r = c.get("/site/sub?q=caf%C3%A9&x")
    assert r.status_code == 307 and r.headers["location"] == "/site/sub/?q=caf%C3%A9&x"


def test_file_changed_between_stat_and_send(local):
    c, pub, swap = local
    path = pub / "a.txt"

    def rewrite():
        path.write_bytes(b"a longer, newer content")
        os.utime(path, ns=(0, 1_000_000_000_000_000_000))

    for headers in ({}, {"range": "bytes=0-3"}):  # a range of the old file: the new one whole instead
        path.write_bytes(b"0123456789")
        swap["then"] = rewrite
        r = c.get("/a", headers=headers)
        st_ = os.stat(path)
        assert r.status_code == 200 and r.content == b"a longer, newer content" and "content-range" not in r.headers
        assert r.headers["content-length"] == str(st_.st_size)
        assert r.headers["etag"] == f'W/"{st_.st_size:x}-{st_.st_mtime_ns:x}"'
        assert r.headers["last-modified"] == formatdate(int(st_.st_mtime), usegmt=True)

    def fifo():
        path.unlink()
        os.mkfifo(path)

    swap["then"] = fifo  # never opened for reading (that would wait for a writer)
    assert c.get("/a").status_code == 404


# -- the pure helpers -------------------------------------------------------------------------------
def test_parse_range():
    assert parse_range("bytes=0-0", 10) == (0, 1)
    assert parse_range("bytes=9-", 10) == (9, 10)
    assert parse_range("bytes=10-", 10) is UNSATISFIABLE
    assert parse_range("bytes=-20", 10) == (0, 10)
    assert parse_range("bytes=-1", 0) is UNSATISFIABLE
    assert parse_range("bytes=3-2", 10) is None
    assert parse_range("bytes=1-2, 4-5", 10) is None
    assert parse_range("bytes=1-2, 3-5", 10) == (1, 6)
    assert parse_range("bytes=-3, 0-1", 10) is None  # apart
    assert parse_range("bytes=-2,7-", 10) == (7, 10)
    assert parse_range("bytes=10-,11-12", 10) is UNSATISFIABLE
    assert parse_range("bytes=,", 10) is None and parse_range("bytes=", 10) is None
    assert parse_range("bytes=" + "1" * 31 + "-", 10) is None  # too many digits: ignored, not int()'d
    assert parse_range("bytes=0-" + " " * 300, 10) is None  # over MAX_RANGE_HEADER


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.integers(min_value=0, max_value=10**6))
def test_parse_range_never_raises_and_stays_in_the_file(header, size):
    got = parse_range(header, size)
    assert got is None or got is UNSATISFIABLE or (0 <= got[0] < got[1] <= size)


class _Req:
    def __init__(self, method="GET", **headers):
        self.method = method
        self._h = {k.replace("_", "-"): v for k, v in headers.items()}

    def header(self, name, default=None):
        return self._h.get(name, default)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80), st.text(max_size=40), st.text(max_size=40))
def test_conditional_headers_never_crash(tmp_path_factory, inm, ims, rng, if_range):
    path = tmp_path_factory.getbasetemp() / "cond.bin"
    if not path.exists():
        path.write_bytes(b"x" * 1000)
    r = FileResponse(path, request=_Req(if_none_match=inm, if_modified_since=ims, range=rng, if_range=if_range))
    assert r.status in (200, 206, 304, 416)
    r = FileResponse(path, request=_Req(if_modified_since=ims, range=rng))
    assert r.status in (200, 206, 304, 416)


def test_file_response_needs_a_regular_file(tmp_path):
    with pytest.raises(NotFound):
        FileResponse(tmp_path / "nope")
    with pytest.raises(NotFound):
        FileResponse(tmp_path)  # a directory
    with pytest.raises(ValueError):
        FileResponse(__file__, chunk_size=0)
    r = FileResponse(__file__, status=203)
    assert r.status == 203 and r.header("content-type") == "text/x-python; charset=utf-8"
    # an explicit text type gets the charset a guessed one gets; others are sent as given
    assert FileResponse(__file__, media_type="text/csv").header("content-type") == "text/csv; charset=utf-8"
    assert FileResponse(__file__, media_type="text/csv; charset=latin-1").header("content-type") == \
        "text/csv; charset=latin-1"
    assert FileResponse(__file__, media_type="application/x-demo").header("content-type") == "application/x-demo"


def test_non_get_methods_and_other_statuses_skip_negotiation(tmp_path):
    p = tmp_path / "f.txt"
    p.write_bytes(b"0123456789")
    assert FileResponse(p, request=_Req("POST", range="bytes=0-1")).status == 200
    assert FileResponse(p, status=404, request=_Req(range="bytes=0-1")).status == 404
    assert FileResponse(p, request=_Req(range="bytes=0-1")).status == 206


def test_content_disposition():
    assert content_disposition("report.pdf") == 'attachment; filename="report.pdf"'
    assert content_disposition("a\r\nb.txt", "inline") == 'inline; filename="ab.txt"'
    assert content_disposition("\u00fc.txt") == "attachment; filename=\"_.txt\"; filename*=UTF-8''%C3%BC.txt"
    with pytest.raises(ValueError):
        content_disposition("x", "evil")


def test_guess_media_type():
    assert guess_media_type("a/b.html") == "text/html; charset=utf-8"
    assert guess_media_type("x.png") == "image/png"
    assert guess_media_type("x.tar.gz") == "application/gzip"
    assert guess_media_type("noext") == "application/octet-stream"
