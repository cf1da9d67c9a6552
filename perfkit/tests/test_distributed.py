"""perfkit distributed: one logical perfkit-load run split into segments over two Dask workers (a LocalCluster of
two processes) against a local server, merged with perfkit-load merge, matches the same run from one process;
failures and bad input are refused clearly; perfkit merge refuses files that are not the segments of one run."""

import json
import subprocess
import time

import pytest
from conftest import run_cli
from distributed import Client, LocalCluster
from stall_server import StallServer

from perfkit import distributed as dist
from perfkit.procs import free_port

# 2 s at 1,000 req/s over 4 connections: 2 connections per segment
ARGS = ["-t", "1", "-c", "4", "-R", "1000", "-d", "2s"]
STALL_AT, STALL_FOR = 1.0, 0.3  # seconds after the start of the schedule


@pytest.fixture(scope="module")
def server():
    srv = StallServer().start()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      worker_dashboard_address=None) as lc, Client(lc) as client:
        client.wait_for_workers(2, timeout=60)
        yield lc, client


def _corrected_p99(doc: dict) -> int:
    return doc["latency"]["corrected"]["percentiles_us"]["p99"]


def test_one_run_over_two_workers_merges_to_the_single_process_run(perfkit_load, server, cluster, tmp_path):
    _, client = cluster
    out = tmp_path / "merged.json"
    start = time.time() + 3.0
    server.stall(start + STALL_AT, STALL_FOR)
    server.reset()
    status, merged, text = dist.run_distributed(
        client, ARGS + [server.url], engine=perfkit_load, merge_engine=perfkit_load, json_out=str(out),
        start_at=start, deadline=60, thresholds=["errors<1%"])
    seen = server.requests
    assert status == 0, text
    assert json.loads(out.read_text()) == merged
    assert merged["segment"]["index"] == [0, 1] and merged["segment"]["count"] == 2
    assert merged["run_id"]
    # every intended request has exactly one outcome ("unfinished" included), and the server saw them
    assert merged["intended"] == sum(merged["outcomes"].values())
    assert abs(seen - merged["intended"]) <= max(10, 0.02 * merged["intended"]), (seen, merged["intended"])
    assert merged["errors"] == 0
    assert merged["target_rate"] == pytest.approx(1000)
    assert [(t["expr"], t["passed"]) for t in merged["thresholds"]] == [("errors<1%", True)]

    # the same flags in one process, against the same stall at the same offset from its start
    single_path = tmp_path / "single.json"
    start = time.time() + 1.0
    server.stall(start + STALL_AT, STALL_FOR)
    r = subprocess.run([perfkit_load] + ARGS + ["--start-at", f"{start:.6f}", "--json", str(single_path), server.url],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    single = json.loads(single_path.read_text())
    assert merged["intended"] == single["intended"]  # constant arrivals: the same schedule, to the request
    # both segments started together: the stall shows alike in the merged and the single-process p99
    assert _corrected_p99(single) >= 200_000 and _corrected_p99(merged) >= 200_000
    assert _corrected_p99(merged) == pytest.approx(_corrected_p99(single), rel=0.10)


def test_a_failing_segment_fails_the_run_naming_its_worker(perfkit_load, cluster):
    _, client = cluster
    closed = f"http://127.0.0.1:{free_port()}/"  # nothing listens there: the engine exits 1 before any load
    with pytest.raises(dist.DistributedError) as e:
        dist.run_distributed(client, ARGS + [closed], engine=perfkit_load, merge_engine=perfkit_load,
                             start_delay=2.0, deadline=30)
    assert e.value.status == 1
    for i, addr in enumerate(sorted(client.scheduler_info()["workers"])):
        assert f"segment {i}/2 on worker {addr} exited with status 1" in str(e.value)


def test_an_engine_missing_on_a_worker_is_named(perfkit_load, cluster, server):
    _, client = cluster
    with pytest.raises(dist.DistributedError) as e:
        dist.run_distributed(client, ARGS + [server.url], engine="/nonexistent/perfkit-load",
                             merge_engine=perfkit_load, start_delay=3.0, deadline=30)
    assert e.value.status == 1 and "/nonexistent/perfkit-load" in str(e.value) and "was not found" in str(e.value)


@pytest.mark.parametrize("flag", [["--segment", "0/2"], ["--start-at", "1"], ["--json", "x.json"], ["--json=x.json"]])
def test_flags_the_run_sets_per_segment_are_refused(perfkit_load, cluster, server, flag):
    _, client = cluster
    with pytest.raises(dist.DistributedError) as e:
        dist.run_distributed(client, ARGS + flag + [server.url], engine=perfkit_load, merge_engine=perfkit_load)
    assert e.value.status == 2 and flag[0].split("=")[0] in str(e.value)


def test_unknown_or_repeated_workers_are_refused(perfkit_load, cluster, server):
    _, client = cluster
    a = sorted(client.scheduler_info()["workers"])[0]
    for workers, why in ((["tcp://127.0.0.1:1"], "no worker 'tcp://127.0.0.1:1'"), ([a, a], "named twice")):
        with pytest.raises(dist.DistributedError) as e:
            dist.run_distributed(client, ARGS + [server.url], workers=workers, engine=perfkit_load,
                                 merge_engine=perfkit_load)
        assert e.value.status == 2 and why in str(e.value)


def test_cli_distributed(perfkit_load, cluster, server, tmp_path):
    lc, _ = cluster
    out = tmp_path / "merged.json"
    server.stall(0, 0)
    r = run_cli(["distributed", "--scheduler", lc.scheduler_address, "--engine", perfkit_load, "--start-delay", "3",
                 "--bin", f"perfkit-load={perfkit_load}", "--json", str(out), "--threshold", "p99<1us", "--",
                 "-t", "1", "-c", "2", "-R", "200", "-d", "1s", server.url], timeout=120)
    # the run went through; the threshold, judged on the merged result, failed
    assert r.returncode == 3, r.stdout + r.stderr
    assert "2 segment(s) on" in r.stderr and r.stdout.strip()
    doc = json.loads(out.read_text())
    assert doc["segment"]["index"] == [0, 1] and doc["intended"] == 200
    assert [(t["expr"], t["passed"]) for t in doc["thresholds"]] == [("p99<1us", False)]
    # bad input: nothing after --, or a flag the run sets itself (refused before the scheduler is contacted)
    r = run_cli(["distributed", "--scheduler", "tcp://127.0.0.1:1"], timeout=60)
    assert r.returncode == 2 and "after --" in r.stderr
    r = run_cli(["distributed", "--scheduler", "tcp://127.0.0.1:1", "--bin", f"perfkit-load={perfkit_load}", "--",
                 "--json", "x.json", server.url], timeout=60)
    assert r.returncode == 2 and "--json is set for each segment" in r.stderr


@pytest.fixture(scope="module")
def segment_files(perfkit_load, server, tmp_path_factory):
    """Two segments of one run (same flags, same start) and a segment of another run, made concurrently."""
    d = tmp_path_factory.mktemp("segments")
    short = ["-t", "1", "-c", "4", "-R", "400", "-d", "1s"]
    start = time.time() + 1.0
    runs = {"a0": (short, "0/2", start), "a1": (short, "1/2", start),
            "b1": (["-t", "1", "-c", "4", "-R", "600", "-d", "1s"], "1/2", start + 0.25)}
    procs = {name: subprocess.Popen([perfkit_load] + flags + ["--segment", seg, "--start-at", f"{at:.6f}",
                                                        "--json", str(d / f"{name}.json"), server.url],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for name, (flags, seg, at) in runs.items()}
    for name, p in procs.items():
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, f"{name}: {err}"
    return {name: d / f"{name}.json" for name in runs}


def test_cli_merge_adds_the_segments_of_one_run(perfkit_load, segment_files, tmp_path):
    out = tmp_path / "merged.json"
    r = run_cli(["merge", str(segment_files["a0"]), str(segment_files["a1"]), "--json", str(out),
                 "--bin", f"perfkit-load={perfkit_load}"], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip()  # the wrk2-style report
    doc = json.loads(out.read_text())
    parts = [json.loads(segment_files[n].read_text()) for n in ("a0", "a1")]
    assert doc["segment"]["index"] == [0, 1]
    assert doc["intended"] == sum(p["intended"] for p in parts) == 400
    assert doc["intended"] == sum(doc["outcomes"].values())
    # thresholds are judged on the merged result: exit 3 when one fails, the result written all the same
    r = run_cli(["merge", str(segment_files["a0"]), str(segment_files["a1"]), "--json", str(out),
                 "--threshold", "errors<50%", "--threshold", "p99<1us", "--bin", f"perfkit-load={perfkit_load}"],
                timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert [(t["expr"], t["passed"]) for t in doc["thresholds"]] == [("errors<50%", True), ("p99<1us", False)]


def test_cli_merge_refuses_segments_of_different_runs(perfkit_load, segment_files, tmp_path):
    a0, b1 = (json.loads(segment_files[n].read_text()) for n in ("a0", "b1"))
    assert a0["run_id"] != b1["run_id"]
    r = run_cli(["merge", str(segment_files["a0"]), str(segment_files["b1"]), "--json", str(tmp_path / "m.json"),
                 "--bin", f"perfkit-load={perfkit_load}"], timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "same run" in r.stderr


def test_cli_merge_refuses_a_segment_given_twice(perfkit_load, segment_files, tmp_path):
    r = run_cli(["merge", str(segment_files["a0"]), str(segment_files["a0"]), "--json", str(tmp_path / "m.json"),
                 "--bin", f"perfkit-load={perfkit_load}"], timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "given twice" in r.stderr


def test_the_merged_interval_log_reads_with_the_hdrhistogram_package(perfkit_load, segment_files, tmp_path):
    """--hdr-log is HdrHistogram's interval-log format: the Python package reads it back, interval by interval,
    with the counts and values of the result's time series."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    log, out = tmp_path / "merged.hlog", tmp_path / "merged.json"
    r = subprocess.run([perfkit_load, "merge", "--hdr-log", str(log), "--json", str(out),
                        str(segment_files["a0"]), str(segment_files["a1"])], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    merged = json.loads(out.read_text())
    reader = HistogramLogReader(str(log), HdrHistogram(1, 3_600_000_000, 3))
    got = []
    while (h := reader.get_next_interval_histogram()) is not None:
        got.append((h.get_total_count(), h.get_value_at_percentile(99)))
    want = [(iv["requests"] + iv["outcomes"]["timeout"] + iv["outcomes"]["unfinished"], iv["percentiles_us"]["p99"])
            for iv in merged["intervals"]]
    assert got == want and got, (got, want)
