"""Slowloris and idle timeouts, the connection limit, graceful shutdown, idle CPU."""
import os
import signal
import socket
import time

import pytest

from rawhttp import Reader, get, metric_value, request, wait_until


def trickle_until_answered(s, rd, pieces) -> bool:
    """Send the pieces 0.1 s apart until the server answers (bytes land in ``rd``) or closes."""
    for piece in pieces:
        try:
            s.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            return False
        s.settimeout(0.1)
        try:
            chunk = s.recv(4096)
            if chunk:
                rd.buf += chunk
                return True
        except socket.timeout:
            pass
    return False


def test_slowloris_header_timeout(make_server):
    srv = make_server("--header-timeout-ms", "600", "--idle-timeout-ms", "30000")
    with srv.connect() as s:
        rd = Reader(s)
        start = time.monotonic()
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n")
        # keep trickling header bytes: activity must not extend the deadline
        got = trickle_until_answered(s, rd, (b"X-%d: y\r\n" % i for i in range(40)))
        assert got, "no timeout response"
        s.settimeout(5)
        r = rd.read_response()
        elapsed = time.monotonic() - start
        assert r.status == 408
        assert 0.5 <= elapsed < 2.5
        assert rd.at_eof()


def test_slow_but_complete_headers_are_served(make_server):
    srv = make_server("--header-timeout-ms", "2000")
    with srv.connect() as s:
        for part in (b"GET /plain", b"text HTTP/1.1\r\n", b"Host: t\r\n", b"\r\n"):
            s.sendall(part)
            time.sleep(0.1)
        assert Reader(s).read_response().status == 200


def test_idle_keep_alive_timeout(make_server):
    srv = make_server("--idle-timeout-ms", "500")
    with srv.connect() as s:
        rd = Reader(s)
        s.sendall(get("/plaintext"))
        assert rd.read_response().status == 200
        start = time.monotonic()
        assert rd.at_eof(timeout=5)
        assert 0.4 <= time.monotonic() - start < 2.5
    # a connection that never sends anything is closed too
    with srv.connect() as s:
        assert Reader(s).at_eof(timeout=5)


def test_max_connections(make_server):
    srv = make_server("--max-connections", "3")
    held = [srv.connect() for _ in range(3)]
    try:
        for s in held:
            s.sendall(get("/healthz"))
            assert Reader(s).read_response().status == 200
        with srv.connect() as extra:
            rd = Reader(extra)
            r = rd.read_response()
            assert r.status == 503
            assert rd.at_eof()
        assert metric_value_via(held[0], "aurora_connections_rejected_total") == 1
    finally:
        for s in held:
            s.close()
    # once they are gone, new connections are served again
    assert wait_until(lambda: _plaintext_ok(srv))


def metric_value_via(sock, name):
    sock.sendall(get("/metrics"))
    body = Reader(sock).read_response().body.decode()
    for line in body.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(name)


def _plaintext_ok(srv):
    try:
        return request(srv, get("/plaintext")).status == 200
    except (EOFError, OSError):
        return False


def test_graceful_shutdown_finishes_in_flight_request(make_server):
    srv = make_server()
    idle = srv.connect()
    busy = srv.connect()
    busy.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello")
    time.sleep(0.2)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert srv.proc.poll() is None  # still draining the busy connection
    # the idle keep-alive connection was closed
    assert Reader(idle).at_eof()
    # new connections are refused
    with pytest.raises(ConnectionRefusedError):
        srv.connect(timeout=1)
    busy.sendall(b"world")
    rd = Reader(busy)
    r = rd.read_response()
    assert r.status == 200 and r.body == b"helloworld"
    assert r.header("Connection") == "close"
    assert rd.at_eof()
    assert srv.proc.wait(10) == 0
    assert "stopped" in srv.proc.stderr.read()


def test_sigterm_when_idle_exits_zero(make_server):
    srv = make_server(workers=2)
    assert request(srv, get("/plaintext")).status == 200
    assert srv.stop() == 0


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_server_does_not_spin(make_server):
    srv = make_server(workers=2)
    conns = [srv.connect() for _ in range(5)]  # idle keep-alive connections
    try:
        for s in conns:
            s.sendall(get("/plaintext"))
            Reader(s).read_response()
        before = _cpu_seconds(srv.proc.pid)
        time.sleep(2.0)
        used = _cpu_seconds(srv.proc.pid) - before
        assert used < 0.05, f"idle server used {used:.3f} s of CPU in 2 s"
    finally:
        for s in conns:
            s.close()


def test_out_of_descriptors_does_not_spin(aurora_bin):
    import resource
    import subprocess
    from rawhttp import Server

    def low_fd_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))

    proc = subprocess.Popen([aurora_bin, "--port", "0", "--workers", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=low_fd_limit)
    srv = None
    conns = []
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1].split()[0])
        srv = Server(proc, "127.0.0.1", port)
        # more connections than the server has descriptors: the extra ones wait in the backlog
        conns = [srv.connect() for _ in range(40)]
        time.sleep(0.3)
        before = _cpu_seconds(proc.pid)
        time.sleep(1.5)
        used = _cpu_seconds(proc.pid) - before
        assert used < 0.1, f"server spun at the descriptor limit ({used:.2f} s CPU in 1.5 s)"
        # the first ones are served; after they go, the waiting ones are accepted and served too
        conns[0].sendall(get("/plaintext"))
        assert Reader(conns[0]).read_response().status == 200
        for s in conns[:20]:
            s.close()
        last = conns[-1]
        last.sendall(get("/plaintext"))
        assert Reader(last).read_response().status == 200
    finally:
        for s in conns:
            s.close()
        if srv:
            assert srv.stop() == 0
        else:
            proc.kill()


def test_shutdown_answers_connections_still_in_the_accept_queue(aurora_bin):
    """Connections the server has not accepted yet (here: it is out of descriptors) are taken from the
    listener's queue at shutdown and their requests answered, instead of being reset with the listener."""
    import resource
    import subprocess
    from rawhttp import Server

    def low_fd_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))

    proc = subprocess.Popen([aurora_bin, "--port", "0", "--workers", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=low_fd_limit)
    conns = []
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1].split()[0])
        srv = Server(proc, "127.0.0.1", port)
        conns = [srv.connect() for _ in range(40)]  # the last ones wait in the backlog
        time.sleep(0.3)
        waiting = conns[-5:]
        for s in waiting:
            s.sendall(get("/plaintext"))
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        for s in waiting:
            r = Reader(s).read_response()
            assert r.status == 200 and r.header("Connection") == "close"
        assert proc.wait(10) == 0
    finally:
        for s in conns:
            s.close()
        if proc.poll() is None:
            proc.kill()


def test_sigterm_under_traffic_exits_cleanly(make_server):
    import threading

    srv = make_server(workers=2)
    idle = [srv.connect() for _ in range(50)]
    stop = threading.Event()
    served = [0]

    def pump():
        while not stop.is_set():
            try:
                with srv.connect(timeout=2) as s:
                    rd = Reader(s)
                    for _ in range(20):
                        s.sendall(get("/json") * 5)
                        for _ in range(5):
                            rd.read_response()
                            served[0] += 1
            except (OSError, EOFError):
                pass  # refused or closed once shutdown starts

    threads = [threading.Thread(target=pump) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(15) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for s in idle:
            s.close()
    assert served[0] > 100


def test_trickled_body_hits_the_request_deadline(make_server):
    """A body trickled so slowly that each byte resets the idle timer still ends with 408 at the
    whole-request deadline (header and body), and the connection is closed."""
    srv = make_server("--request-timeout-ms", "1500", "--header-timeout-ms", "1000", "--idle-timeout-ms", "30000")
    with srv.connect() as s:
        rd = Reader(s)
        start = time.monotonic()
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n")
        # one byte every 0.1 s: never idle for long
        got = trickle_until_answered(s, rd, (b"x" for _ in range(100)))
        assert got, "no response to a body trickled for 10 s"
        s.settimeout(5)
        r = rd.read_response()
        elapsed = time.monotonic() - start
        assert r.status == 408 and r.header("Connection") == "close"
        assert 1.4 <= elapsed < 5.0
        assert rd.at_eof()


def test_request_deadline_does_not_cut_keep_alive_or_served_requests(make_server):
    srv = make_server("--request-timeout-ms", "800", "--header-timeout-ms", "800")
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(3):  # a keep-alive connection outlives the request deadline between requests
            s.sendall(get("/plaintext"))
            assert rd.read_response().status == 200
            time.sleep(0.5)
        # a body completed well within the deadline is served
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab")
        time.sleep(0.2)
        s.sendall(b"cd")
        r = rd.read_response()
        assert r.status == 200 and r.body == b"abcd"


def _buffer_gauge(srv):
    return metric_value(srv, "aurora_connection_buffer_bytes")


def test_idle_connections_give_their_buffers_back(make_server):
    """A connection that needed a large buffer (a 60 KB body over several reads) keeps only the small
    read size once idle; closed connections do not keep large buffers in the free list."""
    srv = make_server("--idle-timeout-ms", "30000")
    body = b"x" * 60_000
    held = []
    try:
        for _ in range(4):
            s = srv.connect()
            held.append(s)
            s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:1000])
            time.sleep(0.05)
            s.sendall(body[1000:])
            r = Reader(s).read_response()
            assert r.status == 200 and len(r.body) == len(body)
        # the gauge is refreshed by the worker's sweep (at least once a second): let two sweeps pass
        time.sleep(2.5)
        gauge = _buffer_gauge(srv)
        assert gauge <= 4 * 8192, f"idle connections hold {gauge} bytes of buffers"
    finally:
        for s in held:
            s.close()
    # closed: the buffers kept for reuse (counted in the gauge) are small too
    time.sleep(2.5)
    gauge = _buffer_gauge(srv)
    assert gauge <= 4 * 8192 + 8192, f"closed connections keep {gauge} bytes of buffers"
