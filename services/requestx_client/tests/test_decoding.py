"""Content-Encoding on every path, with one set of decoders (src/decode.rs): the direct path, reqwest's
path reading the whole body (a total timeout) and reqwest's path streaming it (stream=True), each against a
server that sends the encoded body a few bytes at a time; limits, corrupt data and empty bodies."""

from __future__ import annotations

import gzip
import os
import zlib

import brotli
import pytest
import zstandard

import requestx_client as requests
from requestx_client import exceptions as exc
from servers import RawServer

ENCODERS = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
            "zstd": lambda b: zstandard.ZstdCompressor().compress(b)}
PLAIN = os.urandom(3000) + b"text " * 20_000  # some incompressible, some compressible
PATHS = ["direct", "reqwest", "reqwest-stream"]


def _session(path: str, **kw) -> requests.Session:
    return requests.Session(total_timeout=30, **kw) if path != "direct" else requests.Session(**kw)


def _get(s: requests.Session, url: str, path: str) -> bytes:
    if path == "reqwest-stream":
        with s.get(url, stream=True) as r:
            return b"".join(r.iter_content(1000))
    return s.get(url).content


def _dripped(body: bytes, encoding: str, piece: int = 7) -> list[bytes]:
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n" % (encoding.encode(), len(body))
    return [head] + [body[i:i + piece] for i in range(0, min(len(body), 700), piece)] + [body[700:]]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_body_arriving_a_few_bytes_at_a_time_is_decoded(path, encoding):
    encoded = ENCODERS[encoding](PLAIN)
    with RawServer(lambda c, r, h: _dripped(encoded, encoding)) as srv, _session(path) as s:
        assert _get(s, srv.url, path) == PLAIN
        r = s.get(srv.url)
        assert "Content-Encoding" not in r.headers and "Content-Length" not in r.headers  # they described the wire


@pytest.mark.parametrize("path", PATHS)
def test_every_path_offers_the_codings_it_decodes(path):
    with RawServer(lambda c, r, h: b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") as srv, _session(path) as s:
        _get(s, srv.url, path)
        fields = dict(line.split(": ", 1) for line in srv.requests[0].decode().split("\r\n")[1:])
    assert fields["Accept-Encoding"] == "gzip, deflate, br, zstd"


@pytest.mark.parametrize("path", ["direct", "reqwest"])
def test_a_bomb_stops_at_max_decoded_size_on_every_path(path):
    bomb = gzip.compress(b"\0" * (16 << 20))
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb) + bomb
    with RawServer(lambda c, r, h: answer) as srv, _session(path, max_decoded_size=1 << 20) as s:
        with pytest.raises(exc.ContentDecodingError, match="larger than the limit"):
            s.get(srv.url)


def test_max_body_size_counts_the_bytes_as_sent_on_the_reqwest_path():
    encoded = gzip.compress(b"a" * 100_000)  # ~100 KB decoded from a few hundred bytes
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(encoded) + encoded
    with RawServer(lambda c, r, h: answer) as srv, _session("reqwest", max_body_size=4096) as s:
        assert len(s.get(srv.url).content) == 100_000
    with RawServer(lambda c, r, h: answer) as srv, _session("reqwest", max_body_size=100) as s:
        with pytest.raises(exc.RequestException, match="larger than the limit of 100 bytes"):
            s.get(srv.url)


@pytest.mark.parametrize("path", PATHS)
def test_corrupt_data_is_a_content_decoding_error(path):
    body = b"\x1f\x8b\x08\x00garbage that is not deflate data" * 10
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with RawServer(lambda c, r, h: answer) as srv, _session(path) as s:
        with pytest.raises(exc.ContentDecodingError):
            _get(s, srv.url, path)


@pytest.mark.parametrize("path", PATHS)
def test_an_empty_encoded_body_is_empty(path):
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n"
    with RawServer(lambda c, r, h: answer) as srv, _session(path) as s:
        assert _get(s, srv.url, path) == b""
