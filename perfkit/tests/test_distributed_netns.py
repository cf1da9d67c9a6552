"""Three hosts on one machine: a server host and two load hosts, each a network namespace, joined by veth pairs to a
bridge in a fourth (switch) namespace, with addresses from 198.18.0.0/15 (RFC 2544's benchmarking range) only. The
Dask scheduler and the client run in the root namespace, which joins the same segment; one `dask worker` runs on
each load host.

The same 10 s run at 2,000 req/s, against a server that stalls for 1 s at the same offset from the start of the
schedule, is made (a) by one perfkit-load process on one load host and (b) split over both load hosts by
perfkit.distributed: the merged corrected p99 equals the single-process one, and both show the stall.

Needs root and `ip` (iproute2); creates every namespace and link itself (names unique per run) and removes them
even when the test fails. Tagged manual: `tools/bazel test //perfkit:distributed_netns_test`, by hand.
"""

import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import HERE, cli_env
from distributed import Client

from perfkit import distributed as dist

ARGS = ["-t", "1", "-c", "16", "-R", "2000", "-d", "10s"]
STALL_AT, STALL_FOR = 4.5, 1.0  # seconds after the start of the schedule
HOSTS = {"srv": 10, "l1": 11, "l2": 12}  # last octet of each namespace's address; the root namespace has .1


def _ip_command() -> str | None:
    return shutil.which("ip") or shutil.which("ip", path="/usr/local/sbin:/usr/sbin:/sbin")


IP = _ip_command()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


class Network:
    """The namespaces, links and addresses of one test run; ``down()`` removes all of them."""

    def __init__(self):
        tag = secrets.token_hex(3)
        self.ns = {name: f"pk{tag}{name}" for name in ("sw", *HOSTS)}
        self.root_link = f"pk{tag}h"
        used = _ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout
        for _ in range(50):
            prefix = f"198.{random.choice((18, 19))}.{random.randrange(256)}."
            if prefix not in used:
                break
        else:
            raise RuntimeError("no free /24 in 198.18.0.0/15 on this machine")
        self.addr = {"root": prefix + "1", **{h: prefix + str(n) for h, n in HOSTS.items()}}
        self.created: list[str] = []

    def up(self) -> None:
        for ns in self.ns.values():
            _ip("netns", "add", ns)
            self.created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        sw = self.ns["sw"]
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for host in HOSTS:
            self._plug(f"{self.ns[host]}a", f"{self.ns[host]}b")
            _ip("link", "set", f"{self.ns[host]}a", "netns", self.ns[host])
            _ip("-n", self.ns[host], "link", "set", f"{self.ns[host]}a", "name", "eth0")
            _ip("-n", self.ns[host], "addr", "add", f"{self.addr[host]}/24", "dev", "eth0")
            _ip("-n", self.ns[host], "link", "set", "eth0", "up")
        self._plug(self.root_link, f"{self.root_link}b")
        _ip("addr", "add", f"{self.addr['root']}/24", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")

    def _plug(self, end: str, switch_end: str) -> None:
        """A veth pair whose ``switch_end`` is a port of the bridge; ``end`` stays in the root namespace."""
        _ip("link", "add", end, "type", "veth", "peer", "name", switch_end)
        _ip("link", "set", switch_end, "netns", self.ns["sw"])
        _ip("-n", self.ns["sw"], "link", "set", switch_end, "master", "br0")
        _ip("-n", self.ns["sw"], "link", "set", switch_end, "up")

    def down(self) -> None:
        for ns in self.created:
            # only what this test started runs in its namespaces
            for pid in _ip("netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        _ip("link", "del", self.root_link, check=False)
        for ns in self.created:
            _ip("netns", "del", ns, check=False)
        # a link of a half-made pair left in the root namespace
        for host in HOSTS:
            _ip("link", "del", f"{self.ns[host]}a", check=False)


def _start(cmd: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=cli_env(), start_new_session=True, **kw)


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)
        except ProcessLookupError:
            pass


def _stall(server_url: str, at: float) -> None:
    with urllib.request.urlopen(f"{server_url}_control/stall?at={at:.6f}&for={STALL_FOR}", timeout=5) as r:
        assert r.status == 200


def _p99(doc: dict) -> int:
    return doc["latency"]["corrected"]["percentiles_us"]["p99"]


@pytest.fixture
def network():
    if os.geteuid() != 0:
        pytest.skip("needs root: it creates network namespaces")
    if IP is None:
        pytest.skip("needs the ip command (Debian package iproute2)")
    net = Network()
    try:
        try:
            net.up()
        except RuntimeError as e:
            if not net.created or "Operation not permitted" in str(e):
                pytest.skip(f"cannot create network namespaces here ({e}): run it as root, outside any sandbox")
            raise
        yield net
    finally:
        net.down()


def test_merged_p99_equals_the_single_process_p99_across_hosts(network, perfkit_load, tmp_path):
    engine = perfkit_load
    net = network
    procs: list[subprocess.Popen] = []
    client = None
    try:
        server = _start([IP, "netns", "exec", net.ns["srv"], sys.executable, os.path.join(HERE, "stall_server.py"),
                         "--host", net.addr["srv"], "--port", "0"], stdout=subprocess.PIPE, text=True)
        procs.append(server)
        line = server.stdout.readline()
        assert line.startswith("listening on "), f"the stall server did not start: {line!r}"
        url = f"http://{line.split()[-1]}/"

        sched_file = tmp_path / "scheduler.json"
        procs.append(_start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", net.addr["root"],
                             "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)]))
        deadline = time.monotonic() + 60
        while not (sched_file.exists() and sched_file.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sched_file.exists(), "the Dask scheduler did not start"
        for host in ("l1", "l2"):
            work = tmp_path / host
            work.mkdir()
            procs.append(_start([IP, "netns", "exec", net.ns[host], sys.executable, "-m",
                                 "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                                 "--host", net.addr[host], "--name", host, "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard", "--local-directory", str(work)]))
        client = Client(json.loads(sched_file.read_text())["address"], timeout=30)
        client.wait_for_workers(2, timeout=60)
        workers = client.scheduler_info()["workers"]
        assert sorted(w.split("//")[1].rsplit(":", 1)[0] for w in workers) == [net.addr["l1"], net.addr["l2"]]

        # (a) one process on one load host
        single_path = tmp_path / "single.json"
        start = time.time() + 2.0
        _stall(url, start + STALL_AT)
        r = subprocess.run([IP, "netns", "exec", net.ns["l1"], engine] + ARGS
                           + ["--start-at", f"{start:.6f}", "--json", str(single_path), url],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        single = json.loads(single_path.read_text())

        # (b) the same run as two segments, one per load host
        start = time.time() + 3.0
        _stall(url, start + STALL_AT)
        status, merged, text = dist.run_distributed(client, ARGS + [url], engine=engine, merge_engine=engine,
                                                    json_out=str(tmp_path / "merged.json"), start_at=start,
                                                    deadline=90)
        assert status == 0, text
        print(f"single process: intended {single['intended']} p99 {_p99(single)} us; "
              f"two hosts merged: intended {merged['intended']} p99 {_p99(merged)} us")
        assert merged["segment"]["index"] == [0, 1]
        assert merged["intended"] == single["intended"] == sum(merged["outcomes"].values())
        # both see the stall, and the merged histogram gives the single process's p99 (3 significant digits of
        # HdrHistogram, plus a little timing jitter between two real runs)
        assert _p99(single) >= 500_000 and _p99(merged) >= 500_000, (_p99(single), _p99(merged))
        assert _p99(merged) == pytest.approx(_p99(single), rel=0.05), (_p99(single), _p99(merged))
    finally:
        if client is not None:
            client.close()
        for p in reversed(procs):
            _stop(p)
