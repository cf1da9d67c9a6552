"""A session shared by 8 threads, the interpreter lock released during I/O, and a big streamed body
read in bounded memory."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requestx_client as requests


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def test_eight_threads_share_one_session(server, tls_server, ca_file):
    s = requests.Session(verify=ca_file)
    errors = []

    def worker(t: int) -> int:
        done = 0
        for i in range(40):
            base = server.url if i % 2 else tls_server.url
            r = s.get(base + "/echo", params={"t": t, "i": i}, headers={"X-Thread": str(t)})
            j = r.json()
            if j["args"] != [["t", str(t)], ["i", str(i)]] or j["headers"]["X-Thread"] != str(t):
                errors.append((t, i, j))
            done += 1
        return done

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(worker, range(8))) == 320
    assert errors == []
    assert s._native.pool_count() == 2  # plain http and the test CA's TLS setting, each shared by every thread


def test_gil_released_while_waiting(server):
    """Four slow requests from four threads overlap: the lock is not held during network waits."""
    s = requests.Session()
    t0 = time.monotonic()
    threads = [threading.Thread(target=lambda: s.get(server.url + "/slow-headers?delay=0.4")) for _ in range(4)]
    ticks = 0
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):  # the main thread keeps running Python meanwhile
        ticks += 1
        time.sleep(0.001)
    took = time.monotonic() - t0
    assert took < 0.8, took
    assert ticks > 100


def test_big_streamed_body_bounded_memory(server):
    size = 200 * 1024 * 1024
    s = requests.Session()
    r = s.get(server.url + f"/big?size={size}", stream=True)
    before = _rss_kib()
    peak = before
    total = 0
    for i, chunk in enumerate(r.iter_content(chunk_size=256 * 1024)):
        total += len(chunk)
        if i % 64 == 0:
            peak = max(peak, _rss_kib())
    assert total == size
    assert peak - before < 64 * 1024, f"RSS grew by {(peak - before) // 1024} MiB while streaming"
    assert s.get(server.url + "/echo").ok


def test_many_requests_no_leak(server):
    s = requests.Session()
    for _ in range(300):
        s.get(server.url + "/echo")
    before = _rss_kib()
    for _ in range(2000):
        assert s.get(server.url + "/big?size=2000").content == b"x" * 2000
    assert _rss_kib() - before < 8 * 1024


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_new_timeout_on_every_call_does_not_pile_up_pools(server, tls_server, ca_file):
    """``timeout=deadline - now()`` differs on every call: the pools (and their sockets) stay bounded."""
    with requests.Session() as s:
        s.get(server.url + "/echo", stream=True, timeout=5).close()
        before = _open_fds()
        for i in range(200):
            with s.get(server.url + "/echo", stream=True, timeout=5 + i / 1000) as r:
                assert r.json()["method"] == "GET"
            s.get(tls_server.url + "/echo", verify=ca_file, timeout=(4 + i / 1000, 5)).close()
        assert s._native.pool_count() == 2  # one per TLS setting (plain, the test CA), whatever the timeouts
        assert _open_fds() - before <= 20


def test_threads_setting_cookies_on_one_session(server):
    s = requests.Session()

    def worker(t: int) -> None:
        for i in range(30):
            r = s.get(server.url + f"/cookies/set?t{t}_{i % 5}={i}")
            assert r.status_code == 200 and r.json()["cookie"]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(worker, range(8)))
    assert len(s.cookies.get_dict()) == 40


_MODE_SCRIPT = r"""
import sys, threading, time
import requestx_client as requests
from requestx_client import _native

url = sys.argv[1]
s = requests.Session()
t0 = time.perf_counter()
threads = [threading.Thread(target=lambda: s.get(url + "/slow-headers?delay=0.4")) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
overlap = time.perf_counter() - t0
bad = []
def work(t):
    for i in range(25):
        r = s.get(url + "/echo", params={"t": t, "i": i})
        if r.status_code != 200 or r.json()["args"] != [["t", str(t)], ["i", str(i)]]:
            bad.append((t, i))
ws = [threading.Thread(target=work, args=(t,)) for t in range(8)]
for t in ws:
    t.start()
for t in ws:
    t.join()
print(_native.sync_io_mode(), round(overlap, 3), len(bad))
"""


def test_both_sync_io_modes(server, fresh_python):
    """REQUESTX_CLIENT_SYNC_IO selects who drives the blocking API's I/O; both modes overlap waits of
    several threads and keep their responses apart. Unset (or unknown, like the former "caller"), the
    default is the direct path (blocking sockets on the calling thread for plain http, the background
    worker for the rest)."""
    for setting, expected in (("worker", "worker"), ("direct", "direct"), ("caller", "direct"), (None, "direct")):
        env = {} if setting is None else {"REQUESTX_CLIENT_SYNC_IO": setting}
        out = fresh_python(_MODE_SCRIPT, server.url, env=env, timeout=30)
        assert out.returncode == 0, out.stderr
        mode, overlap, bad = out.stdout.split()
        assert mode == expected
        assert float(overlap) < 1.2, f"{mode}: 4 waits of 0.4 s took {overlap} s"
        assert bad == "0"
