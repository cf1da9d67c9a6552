"""StaticFiles never serves anything outside its root.  A hypothesis fuzz over hostile paths (in
process, against a tree with a secret beside the root, symlinks pointing out, a FIFO and unicode
names), then hostile raw request lines over real sockets to granian (RSGI and ASGI) and uvicorn."""
import asyncio
import os

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from files_app import SECRET, SERVERS, make_tree, serving
from server_util import raw_request, status_of

from aquilia_app.exceptions import NotFound
from aquilia_app.files import FileResponse, StaticFiles, safe_relative_path
from aquilia_app.responses import Response


class _Req:
    method = "GET"
    path = "/static/x"
    query_string = ""  # read by html mode's redirect that adds a '/'

    def header(self, name, default=None):
        return default


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    base = tmp_path_factory.mktemp("static")
    make_tree(str(base))
    return str(base)


SEGMENTS = ["..", ".", "", "%2e%2e", "%2e", "..%2f", "%2f", "%252e%252e", "\\", "..\\..", "\x00", "%00",
            "hello.txt", "sub", "index.html", "link-out", "dir-out", "link-in", "secret.txt", "fifo", "emptydir",
            ".hidden", "\u2024\u2024", "\uff0e\uff0e", "\u00fcn\u00ef c\u00f6d\u00e9.txt", "\udcff", "~", "a" * 300,
            "x" * 5000, "public", "..."]
SEPARATORS = ["/", "/", "/", "//", "\\", "", "/./", "/../"]


@st.composite
def hostile_paths(draw):
    parts = draw(st.lists(st.tuples(st.one_of(st.sampled_from(SEGMENTS), st.text(max_size=10)),
                                    st.sampled_from(SEPARATORS)), max_size=8))
    lead = draw(st.sampled_from(["", "", "/", "../", "//"]))
    return lead + "".join(seg + sep for seg, sep in parts)


async def _serve(static: StaticFiles, path: str):
    try:
        return await static(_Req(), path)
    except NotFound:
        return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _check(static: StaticFiles, path: str, lexical: bool) -> None:
    resp = asyncio.run(_serve(static, path))
    if resp is None:
        return
    if isinstance(resp, Response):  # html mode: the redirect that adds a '/'
        assert resp.status == 307 and resp.header("location").startswith("/static/")
        assert not resp.header("location").startswith("//")
        return
    assert isinstance(resp, FileResponse) and resp.status == 200
    if lexical:  # follow_symlink=True: symlinks may point out, the path itself may not
        assert _inside(os.path.normpath(resp.path), static.root)
    else:
        assert _inside(os.path.realpath(resp.path), static.root)
        with open(resp.path, "rb") as f:
            assert f.read() != SECRET
    assert safe_relative_path(path) == path  # only a plain relative path ever reached the disk


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=hostile_paths())
@example(path="sub")  # a folder: html mode redirects to add the '/'
def test_fuzz_never_leaves_the_root(tree, path):
    root = os.path.join(tree, "public")
    _check(StaticFiles(root), path, lexical=False)
    _check(StaticFiles(root, html=True), path, lexical=False)
    _check(StaticFiles(root, follow_symlink=True), path, lexical=True)


def test_known_attacks_in_process(tree):
    static = StaticFiles(os.path.join(tree, "public"))
    for path in ["../secret.txt", "..", "link-out", "dir-out/secret.txt", "sub/../../secret.txt", "..\\secret.txt",
                 "/" + os.path.join(tree, "secret.txt").lstrip("/"), "hello.txt\x00.png", "fifo", "sub", "emptydir/"]:
        assert asyncio.run(_serve(static, path)) is None, path
    assert asyncio.run(_serve(static, "hello.txt")).status == 200
    # follow_symlink=True: a symlink placed in the tree may point out (that is the option's meaning)
    assert asyncio.run(_serve(StaticFiles(os.path.join(tree, "public"), follow_symlink=True), "link-out")) is not None


def test_safe_relative_path_rules():
    for ok in ("a", "a/b.txt", "a/", "", ".hidden", "a..b", "...", "a" * 4096):
        assert safe_relative_path(ok) == ok
    for bad in ("..", "../a", "a/..", "a/../b", ".", "./a", "a/./b", "a//b", "/a", "//a", "a\\b", "a\x00", "a/" * 2049,
                "a" * 4097, "a//"):
        assert safe_relative_path(bad) is None, bad


def test_static_files_arguments(tree):
    with pytest.raises(ValueError):
        StaticFiles(os.path.join(tree, "secret.txt"))
    with pytest.raises(ValueError):
        StaticFiles(tree, max_age=-1)
    with pytest.raises(ValueError):
        StaticFiles(tree, max_age=True)


# -- over real sockets --------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=list(SERVERS))
def server(request, tree):
    with serving(request.param, tree) as (port, _):
        yield port


def _attacks(tree: str) -> list:
    secret = os.path.join(tree, "secret.txt")
    return ["/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/%2E%2E/secret.txt",
            "/static/..%2fsecret.txt", "/static/%2e%2e%2fsecret.txt", "/static/.%2e/secret.txt",
            "/static/sub/../../secret.txt", "/static/sub/%2e%2e/%2e%2e/secret.txt", "/static/dir-out/secret.txt",
            "/static/link-out", "/static/..\\secret.txt", "/static/..%5csecret.txt", "/static/%5c..%5csecret.txt",
            "/static/%00", "/static/hello.txt%00.png", "/static/" + secret, "/static/%2f" + secret.lstrip("/"),
            "/static/" + "../" * 20 + "etc/passwd", "/static/" + "%2e%2e/" * 20 + "etc/passwd",
            "/static/%252e%252e/secret.txt", "/site/../secret.txt", "/site/dir-out/", "/site/dir-out/secret.txt",
            "http://t/static/../secret.txt", "/static/fifo"]


def test_traversal_over_the_wire(server, tree):
    port = server
    for target in _attacks(tree):
        raw = raw_request(port, f"GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        assert status_of(raw) in (400, 404), (target, raw[:200])
        assert SECRET not in raw and b"root:" not in raw, target
    raw = raw_request(port, b"GET /static/hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert status_of(raw) == 200 and raw.endswith(b"hello static\n")  # the control: serving works
