"""Ctrl-C: every process the bench started is stopped, and what was measured is still written."""

import json
import os
import signal
import subprocess
import sys
import time

from conftest import cli_env

from perfkit import results


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.add(k)
            todo.append(k)
    return out


def test_ctrl_c_stops_everything_and_writes_what_was_measured(tmp_path, tiny_dir, perfkit_load):
    os.unlink(tiny_dir / "tinyclient.toml")
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "perfkit", "--scenarios", str(tiny_dir), "--repeat", "3",
                          "--duration", "3", "--probe", "1", "--warmup", "0.2", "--out", str(out),
                          "--bin", f"perfkit-load={perfkit_load}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    try:
        # wait until the first constant-rate run has started (probes are done: figures exist)
        deadline = time.monotonic() + 60
        seen = ""
        children: set[int] = set()
        while time.monotonic() < deadline:
            line = p.stderr.readline()
            seen += line
            if " req/s (50%, repeat 1/3)" in line:
                break
        assert " req/s (50%" in seen, seen
        time.sleep(0.5)
        children = _descendants(p.pid)
        assert children, "the bench should have servers and a load run going"
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, stderr
    assert "interrupted" in stderr
    time.sleep(0.3)
    assert not [c for c in children if _alive(c)], "processes left running after Ctrl-C"
    doc = json.loads((out / "results.json").read_text())
    results.validate(doc)
    assert doc["interrupted"] is True
    sc = doc["scenarios"][0]
    assert sc["status"] == "interrupted"
    res = sc["workloads"][0]["results"]["asgi-a"]
    assert res["max_rps"]["median"] > 0  # the probes made it into the file
    assert (out / "report.md").exists() and (out / "report.html").exists()
    assert "INTERRUPTED" in (out / "report.md").read_text()
