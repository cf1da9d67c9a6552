"""Hostile and broken servers against the direct path, each on a raw socket, over plain TCP and over TLS:
framing attacks, endless interim answers, oversized heads, chunk lines and trailers, decompression bombs,
body limits, truncation, and what the client itself writes (Host, Content-Length). Every case must end in
the documented exception, promptly, with the process alive and the pool consistent."""

from __future__ import annotations

import gzip
import os
import ssl
import time

import pytest

import requestx_client as requests
from requestx_client import exceptions as exc
from servers import RawServer, ok

pytestmark = pytest.mark.skipif(requests._native.sync_io_mode() != "direct",
                                reason="REQUESTX_CLIENT_SYNC_IO is not direct")


@pytest.fixture(params=["http", "https"])
def serve(request, ca, ca_file, monkeypatch):
    """RawServer over plain TCP, or over TLS with a test-CA certificate the client trusts (REQUESTS_CA_BUNDLE)."""
    ctx = None
    if request.param == "https":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(ctx)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_file)
    return lambda answer: RawServer(answer, tls_context=ctx)


def _raises_quickly(kind, fn, limit=5.0):
    t0 = time.monotonic()
    with pytest.raises(kind) as e:
        fn()
    assert time.monotonic() - t0 < limit
    return e.value


@pytest.mark.parametrize("length", [b"100000000000000", b"18446744073709551615"])
def test_a_huge_content_length_allocates_nothing_up_front(length, serve):
    answer = (b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\n" + b"x" * 70000,)
    with serve(lambda c, r, h: answer) as srv:
        _raises_quickly(exc.RequestException, lambda: requests.get(srv.url))


@pytest.mark.parametrize("field", [b"Content-Length: +5", b"Content-Length: 5, 5", b"Content-Length: 0x5",
                                   b"Content-Length: 5\r\nContent-Length: 6", b"Content-Length: 18446744073709551616"])
def test_malformed_or_conflicting_content_length_is_refused(field, serve):
    # InvalidHeader, as requests raises for conflicting lengths
    answer = b"HTTP/1.1 200 OK\r\n" + field + b"\r\n\r\nhello"
    with serve(lambda c, r, h: answer) as srv:
        _raises_quickly(exc.InvalidHeader, lambda: requests.get(srv.url))


def test_transfer_encoding_wins_over_content_length_and_the_connection_is_dropped(serve):
    answer = (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5\r\nhello\r\n0\r\n\r\n")
    with serve(lambda c, r, h: answer) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"hello"
        assert s.get(srv.url).content == b"hello"
        assert srv.connections == 2 and s._native.direct_idle_count() == 0


def test_a_transfer_coding_other_than_chunked_is_read_until_close(serve):
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nall of this",)
    with serve(lambda c, r, h: answer) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"all of this"
        assert s._native.direct_idle_count() == 0


def test_an_endless_chunk_extension_is_refused(serve):
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;" + b"e" * 100_000 + b"\r\nhello\r\n0\r\n\r\n",)
    with serve(lambda c, r, h: answer) as srv:
        e = _raises_quickly(exc.ChunkedEncodingError, lambda: requests.get(srv.url))
    assert "chunk size line" in str(e)


def test_endless_trailers_are_refused(serve):
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"X-T: v\r\n" * 20_000 + b"\r\n",)
    with serve(lambda c, r, h: answer) as srv:
        _raises_quickly(exc.ChunkedEncodingError, lambda: requests.get(srv.url))


def test_an_endless_stream_of_interim_answers_is_refused(serve):
    answer = (b"HTTP/1.1 100 Continue\r\n\r\n" * 1000 + ok(b"never read"),)
    with serve(lambda c, r, h: answer) as srv:
        e = _raises_quickly(exc.ConnectionError, lambda: requests.get(srv.url))
    assert "interim" in str(e)


def test_a_huge_header_block_is_refused(serve):
    answer = (b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * 1000 + b"\r\n" + b"X-More: " + b"m" * 400_000 + b"\r\n\r\n",)
    with serve(lambda c, r, h: answer) as srv:
        e = _raises_quickly(exc.ConnectionError, lambda: requests.get(srv.url))
    assert "head larger than" in str(e)


def test_a_decompression_bomb_stops_at_the_limit(serve):
    bomb = gzip.compress(b"\0" * (16 << 20))  # 16 MiB of zeros in ~16 KiB
    answer = ok(bomb, b"Content-Encoding: gzip\r\n")
    with serve(lambda c, r, h: answer) as srv:
        with requests.Session(max_decoded_size=1 << 20) as s:
            e = _raises_quickly(exc.ContentDecodingError, lambda: s.get(srv.url))
            assert "larger than the limit" in str(e)
        with requests.Session() as s:  # no limit by default, as requests
            assert len(s.get(srv.url).content) == 16 << 20


def test_a_body_over_the_limit_is_refused_whatever_its_framing(serve):
    big = b"y" * 5000
    answers = [ok(big), b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n" + big + b"\r\n0\r\n\r\n",
               (b"HTTP/1.1 200 OK\r\n\r\n" + big,)]
    for answer in answers:
        with serve(lambda c, r, h: answer) as srv, requests.Session(max_body_size=4096) as s:
            e = _raises_quickly(exc.RequestException, lambda: s.get(srv.url))
            assert "larger than the limit of 4096 bytes" in str(e)


def test_truncated_bodies_are_errors(serve):
    for answer in [(b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + b"z" * 70000,),
                   (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly",)]:
        with serve(lambda c, r, h: answer) as srv:
            _raises_quickly(exc.ChunkedEncodingError, lambda: requests.get(srv.url))


def _fields(head: bytes) -> list[tuple[str, str]]:
    return [tuple(line.split(": ", 1)) for line in head.decode().split("\r\n")[1:]]


def test_a_callers_host_header_is_sent_once_instead_of_the_clients(serve):
    with serve(lambda c, r, h: ok()) as srv:
        requests.get(srv.url, headers={"Host": "example.test"})
        hosts = [v for k, v in _fields(srv.requests[0]) if k.lower() == "host"]
    assert hosts == ["example.test"]


def test_a_callers_content_length_cannot_desynchronise_the_connection(serve):
    with serve(lambda c, r, h: ok(b"r%d" % r)) as srv, requests.Session() as s:
        assert s.post(srv.url, data=b"abc", headers={"Content-Length": "100"}).content == b"r0"
        assert s.post(srv.url, data=b"", headers={"Content-Length": "7"}).content == b"r1"
        assert s.get(srv.url).content == b"r2"
        lengths = [[v for k, v in _fields(h) if k.lower() == "content-length"] for h in srv.requests]
    assert lengths == [["3"], ["0"], []] and srv.connections == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_never_uses_its_parents_pooled_connections(serve):
    with serve(lambda c, r, h: ok(b"c%dr%d" % (c, r))) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"c0r0"
        pid = os.fork()
        if pid == 0:  # the child: a new connection of its own
            code = 0 if s.get(srv.url).content == b"c1r0" else 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert s.get(srv.url).content == b"c0r1"  # the parent's connection is intact and still its own
        assert srv.connections == 2


def test_idle_connections_of_many_hosts_stay_bounded(serve):
    servers = [serve(lambda c, r, h: ok()) for _ in range(70)]
    for srv in servers:
        srv.__enter__()
    try:
        with requests.Session() as s:
            for srv in servers:
                assert s.get(srv.url).status_code == 200
            assert s._native.direct_idle_count() <= 64
    finally:
        for srv in servers:
            srv.__exit__()
