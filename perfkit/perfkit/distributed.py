"""One logical perfkit-load run as N segments on N Dask workers, merged into one result.

Segment ``i`` runs on worker ``i`` as ``perfkit-load --segment i/N --start-at T --json FILE ENGINE_ARGS``: it opens
only its share of the connections, each keeping the rate and schedule it has in the whole run, and every segment
starts its schedule at the same wall-clock time ``T``. The segments' JSON results come back through Dask and
``perfkit-load merge`` adds their histograms and counts into the result one process would have produced.

Dask does nothing here but place one process per host, start them and bring back their files: everything goes
through ``distributed.Client`` (no sockets of our own). The function run on the workers is shipped by value, so a
load host needs only Dask and the ``perfkit-load`` binary, not this package.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Callable, Sequence

import cloudpickle
import distributed

# Set for each segment by run_distributed: refused in the engine arguments.
OWN_FLAGS = ("--segment", "--start-at", "--json")
# A worker whose clock is further than this from ours starts its segment visibly out of step.
CLOCK_TOLERANCE_S = 0.05


class DistributedError(RuntimeError):
    """The distributed run could not be made; ``status`` is the exit status it stands for (1 failed, 2 bad input)."""

    def __init__(self, msg: str, status: int = 1):
        super().__init__(msg)
        self.status = status


def _run_segment(engine: str, args: list[str], index: int, count: int, start_at: float,
                 deadline: float) -> tuple[int | None, str | None, str]:
    """On the worker: run one segment, return (exit status or None if it did not run, JSON text or None, stderr
    or why it did not run). Only the standard library: this function is unpickled on hosts without perfkit."""
    if time.time() >= start_at:
        return None, None, (f"the start time had already passed when the segment reached this worker "
                            f"({time.time() - start_at:.2f} s late): give a longer start delay")
    fd, path = tempfile.mkstemp(prefix=f"perfkit-segment-{index}-", suffix=".json")
    os.close(fd)
    cmd = [engine, "--segment", f"{index}/{count}", "--start-at", f"{start_at:.6f}", "--json", path] + list(args)
    try:
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, errors="replace", timeout=max(1.0, start_at + deadline - time.time()))
        except FileNotFoundError:
            return None, None, f"the load engine {engine!r} was not found on this worker (put it on the PATH)"
        except PermissionError:
            return None, None, f"the load engine {engine!r} is not executable on this worker"
        except OSError as e:
            return None, None, f"cannot start {engine!r}: {e.strerror or e}"
        except subprocess.TimeoutExpired:
            return None, None, f"the segment did not finish within {deadline:g} s of the start time (killed)"
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            text = ""
        return proc.returncode, (text if text.strip() else None), proc.stderr
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


class _ByValue:
    """A module-level function wrapped to pickle by value (with cloudpickle): the Dask scheduler and workers rebuild
    it without importing its module. The bare function would pickle as a reference to ``perfkit.distributed``."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = fn.__name__

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __reduce__(self):
        module = sys.modules[self.fn.__module__]
        cloudpickle.register_pickle_by_value(module)
        try:
            return cloudpickle.loads, (cloudpickle.dumps(self.fn),)
        finally:
            cloudpickle.unregister_pickle_by_value(module)


def check_engine_args(engine_args: Sequence[str]) -> None:
    """Refuse flags that run_distributed sets for each segment, and an empty command."""
    if not engine_args:
        raise DistributedError("no perfkit-load arguments: give its flags and URL (e.g. -c 16 -R 2000 -d 10s URL)", 2)
    for arg in engine_args:
        flag = arg.split("=", 1)[0]
        if flag in OWN_FLAGS:
            raise DistributedError(f"{flag} is set for each segment by the distributed run: leave it out of the "
                                   f"perfkit-load arguments (the merged result goes to --json of the run itself)", 2)


def pick_workers(client: distributed.Client, wanted: Sequence[str] | None) -> list[str]:
    """The worker addresses to run on: ``wanted`` (addresses or worker names, in that order) or every worker of
    the scheduler, sorted by address."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    if not info:
        raise DistributedError(f"the scheduler {client.scheduler.address} has no workers: start "
                               f"`dask worker {client.scheduler.address}` on each load host")
    if not wanted:
        return sorted(info)
    by_name = {str(w.get("name")): addr for addr, w in info.items()}
    picked = []
    for w in wanted:
        addr = w if w in info else by_name.get(w)
        if addr is None:
            raise DistributedError(f"no worker {w!r} on the scheduler {client.scheduler.address} "
                                   f"(workers: {', '.join(sorted(info))})", 2)
        if addr in picked:
            raise DistributedError(f"worker {w!r} is named twice: each segment needs a worker of its own", 2)
        picked.append(addr)
    return picked


def clock_offsets(client: distributed.Client, workers: Sequence[str]) -> dict[str, float]:
    """Each worker's wall clock minus ours, in seconds (± half the round trip)."""
    t0 = time.time()
    remote = client.run(time.time, workers=list(workers))
    t1 = time.time()
    return {addr: t - (t0 + t1) / 2 for addr, t in remote.items()}


def _tail(text: str, lines: int = 10) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


def _segment_failure(worker: str, index: int, count: int, status: int | None, stderr: str) -> str:
    if status is None:
        what = f"did not run: {stderr}"
    elif status in (0, 3):
        what = f"wrote no JSON result (exit status {status}); its stderr:\n{_tail(stderr)}"
    else:
        what = f"exited with status {status}; its stderr:\n{_tail(stderr)}"
    return f"segment {index}/{count} on worker {worker} {what}"


def run_distributed(client: distributed.Client, engine_args: Sequence[str], *, workers: Sequence[str] | None = None,
                    engine: str = "perfkit-load", merge_engine: str, json_out: str | None = None,
                    thresholds: Sequence[str] = (), start_delay: float = 3.0, start_at: float | None = None,
                    deadline: float = 3600.0,
                    say: Callable[[str], None] | None = None) -> tuple[int, dict | None, str]:
    """Run ``perfkit-load ENGINE_ARGS`` as one segment per worker and merge the segments.

    ``engine`` is the load engine's path on the workers (default: ``perfkit-load`` on their PATH), ``merge_engine``
    its path here. Every segment starts its schedule at ``start_at`` (default: now + ``start_delay``) by the
    workers' wall clocks, and must be back within ``deadline`` seconds of it. ``thresholds`` are judged on the
    merged result; ``json_out`` receives it.

    Returns (exit status of ``perfkit-load merge``: 0 ok, 2 not segments of one run, 3 a threshold failed; the
    merged result or None; the merge's text output). Raises DistributedError when a segment fails (status 1, or 2
    for flags the engine refused) or the input is bad (status 2).
    """
    check_engine_args(engine_args)
    if not (shutil.which(merge_engine) if os.sep not in merge_engine else os.access(merge_engine, os.X_OK)):
        raise DistributedError(f"the load engine {merge_engine!r} (for the merge) is not an executable here", 2)
    say = say or (lambda msg: None)
    addrs = pick_workers(client, workers)
    count = len(addrs)
    for addr, off in clock_offsets(client, addrs).items():
        if abs(off) > CLOCK_TOLERANCE_S:
            say(f"warning: the clock of worker {addr} is {off * 1000:+.0f} ms from this host's: its segment will "
                f"not start with the others (synchronise the clocks with NTP, e.g. chrony)")
    if start_at is None:
        start_at = time.time() + start_delay
    when = datetime.datetime.fromtimestamp(start_at).strftime("%H:%M:%S.%f")[:-3]
    say(f"{count} segment(s) on {', '.join(addrs)}; the schedule starts at {when} "
        f"(in {start_at - time.time():.1f} s)")
    run = uuid.uuid4().hex[:8]
    task = _ByValue(_run_segment)
    futures = [client.submit(task, engine, list(engine_args), i, count, start_at, deadline,
                             key=f"perfkit-segment-{run}-{i}-of-{count}", workers=[addr], pure=False,
                             allow_other_workers=False)
               for i, addr in enumerate(addrs)]
    end = time.monotonic() + max(0.0, start_at - time.time()) + deadline + 30
    try:
        while not all(f.done() for f in futures):
            if time.monotonic() > end:
                late = [f"{i}/{count} on {addrs[i]}" for i, f in enumerate(futures) if not f.done()]
                raise DistributedError(f"segment(s) {', '.join(late)} did not come back within {deadline:g} s of "
                                       f"the start (a worker left or hangs)")
            time.sleep(0.05)
    finally:
        client.cancel([f for f in futures if not f.done()])
    texts, failures, refused = [], [], False
    for i, (addr, fut) in enumerate(zip(addrs, futures)):
        if fut.status != "finished":
            why = repr(fut.exception()) if fut.status == "error" else fut.status
            failures.append(f"segment {i}/{count} on worker {addr} failed in Dask: {why}")
            continue
        status, text, stderr = fut.result()
        if text is None or status not in (0, 3):
            failures.append(_segment_failure(addr, i, count, status, stderr))
            refused = refused or status == 2
        else:
            texts.append(text)
    if failures:
        raise DistributedError("\n".join(failures), 2 if refused else 1)
    return merge(texts, merge_engine=merge_engine, json_out=json_out, thresholds=thresholds,
                 latency="-L" in engine_args or "--latency" in engine_args)


def merge(segment_texts: Sequence[str], *, merge_engine: str, json_out: str | None = None,
          thresholds: Sequence[str] = (), latency: bool = False) -> tuple[int, dict | None, str]:
    """``perfkit-load merge`` over segment results given as JSON texts: (exit status, merged result, its output)."""
    with tempfile.TemporaryDirectory(prefix="perfkit-merge-") as tmp:
        files = []
        for i, text in enumerate(segment_texts):
            path = os.path.join(tmp, f"segment-{i}.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            files.append(path)
        out = json_out or os.path.join(tmp, "merged.json")
        cmd = [merge_engine, "merge"] + files + ["--json", out]
        for expr in thresholds:
            cmd += ["--threshold", expr]
        if latency:
            cmd.append("-L")
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                                  timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DistributedError(f"cannot run {merge_engine} merge: {getattr(e, 'strerror', None) or e}") from None
        merged = None
        if proc.returncode in (0, 3):
            try:
                with open(out, encoding="utf-8") as f:
                    merged = json.load(f)
            except (OSError, ValueError) as e:
                raise DistributedError(f"{merge_engine} merge wrote no readable result to {out}: {e}") from None
        return proc.returncode, merged, proc.stdout + proc.stderr
