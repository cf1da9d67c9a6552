"""Streamed uploads (the test server, in this process, hashes them as they arrive, so the allocation peaks
measured here are the client's): a file or an iterable body is read piece by piece while it is sent (never held
whole), with its Content-Length when its size is known and chunked otherwise, over http and https, on the direct
path and on reqwest's; a body that does not match its announced length and a reader that raises end the
request cleanly."""

from __future__ import annotations

import hashlib
import os
import time
import tracemalloc

import pytest

import requestx_client as requests
from requestx_client import exceptions as exc
from servers import RawServer, ok

MIB = 1 << 20


@pytest.fixture(params=["http", "https"])
def base(request, server, tls_server, ca_file, monkeypatch):
    if request.param == "https":
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_file)
        return tls_server.url
    return server.url


def _peak_while(fn):
    """fn()'s result and the peak of Python allocations while it ran."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_is_sent_in_pieces_with_its_length(base, tmp_path):
    path = tmp_path / "big.bin"
    data = os.urandom(MIB) * 24
    path.write_bytes(data)
    with requests.Session() as s, open(path, "rb") as f:
        r, peak = _peak_while(lambda: s.post(base + "/upload-digest", data=f))
    got = r.json()
    assert got == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "framing": "length"}
    assert peak < 4 * MIB, peak  # 24 MiB went out without being read into memory at once


def test_an_iterable_is_sent_chunked_as_it_is_produced(base):
    def pieces():
        for i in range(24):
            yield bytes([i]) * MIB  # each piece made when asked for, dropped once sent

    with requests.Session() as s:
        r, peak = _peak_while(lambda: s.post(base + "/upload-digest", data=pieces()))
    expected = hashlib.sha256()
    for i in range(24):
        expected.update(bytes([i]) * MIB)
    assert r.json() == {"size": 24 * MIB, "sha256": expected.hexdigest(), "framing": "chunked"}
    assert peak < 6 * MIB, peak


def test_str_pieces_are_sent_as_utf8_and_empty_pieces_are_skipped(server):
    r = requests.post(server.url + "/echo", data=iter(["h\u00e9", "", b"llo", bytearray(b"!")]))
    assert r.json()["body"].encode("latin-1") == "h\u00e9llo!".encode()
    assert r.json()["headers"]["Transfer-Encoding"] == "chunked"


@pytest.mark.parametrize("path", ["direct", "reqwest"])
def test_an_iterable_is_streamed_on_either_path(base, path):
    def pieces():
        for _ in range(32):
            yield os.urandom(MIB)

    # a total timeout takes reqwest's path, whose pieces go through a channel filled by the calling thread
    with requests.Session(total_timeout=60 if path == "reqwest" else None) as s:
        r, peak = _peak_while(lambda: s.post(base + "/upload-digest", data=pieces()))
    assert r.json()["size"] == 32 * MIB and r.json()["framing"] == "chunked"
    # bounded, not the body: on reqwest's path 4 pieces wait in the channel, one more waits to enter it, one
    # is being written and one is being made, and the in-process server's read buffer counts too (8.02 MiB
    # was seen once with a 16-piece body under a parallel test load)
    assert peak < 12 * MIB, peak


def test_a_file_is_streamed_with_its_length_on_the_reqwest_path(base, tmp_path):
    path = tmp_path / "big.bin"
    data = os.urandom(MIB) * 16
    path.write_bytes(data)
    with requests.Session(total_timeout=60) as s, open(path, "rb") as f:
        r, peak = _peak_while(lambda: s.put(base + "/upload-digest", data=f))
    assert r.json() == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "framing": "length"}
    assert peak < 8 * MIB, peak


def test_a_reader_that_raises_on_the_reqwest_path_raises_its_exception(server):
    def pieces():
        yield b"first"
        raise KeyError("the source failed")

    with requests.Session(total_timeout=10) as s:
        with pytest.raises(KeyError, match="the source failed"):
            s.post(server.url + "/upload-digest", data=pieces())
        assert s.get(server.url + "/echo").status_code == 200


class _Lying:
    """A file-like body whose length (what requests announces) is not what it reads."""

    def __init__(self, announced: int, content: bytes) -> None:
        self.announced, self.content = announced, content

    def __len__(self) -> int:
        return self.announced

    def __iter__(self):
        return iter([self.content])

    def read(self, n: int = -1) -> bytes:
        out, self.content = self.content, b""
        return out


@pytest.mark.parametrize("announced, content", [(100, b"short"), (3, b"longer than three")])
def test_a_body_that_does_not_match_its_length_is_an_error_not_a_hang(announced, content):
    with RawServer(lambda c, r, h: ok(b"r%d" % r)) as srv, requests.Session() as s:
        t0 = time.monotonic()
        with pytest.raises(exc.RequestException, match="Content-Length"):
            s.post(srv.url, data=_Lying(announced, content), timeout=5)
        assert time.monotonic() - t0 < 3
        assert s.get(srv.url).status_code == 200  # on a new connection: the broken one was dropped
        assert srv.connections == 2


def test_a_reader_that_raises_ends_the_request_with_its_exception():
    def pieces():
        yield b"first"
        raise ValueError("the source failed")

    with RawServer(lambda c, r, h: ok()) as srv, requests.Session() as s:
        with pytest.raises(ValueError, match="the source failed"):
            s.put(srv.url, data=pieces(), timeout=5)
        assert s.get(srv.url).status_code == 200
        assert srv.connections == 2  # the half-sent request's connection was not reused
