"""Process control: start a system pinned to a CPU set, wait until it is ready, capture its log,
read its peak RSS and CPU time from /proc (over its whole process tree), and stop it cleanly.

Every process started here is tracked, so that Ctrl-C can stop all of them (``stop_all``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

_LIVE: set["Proc"] = set()
_LIVE_LOCK = threading.Lock()
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class StartError(RuntimeError):
    """A system did not start or did not become ready; ``log_tail`` holds the end of its output."""

    def __init__(self, msg: str, log_tail: str = ""):
        super().__init__(msg)
        self.log_tail = log_tail


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def cpu_sets() -> tuple[str, str]:
    """(systems under test, load engine): disjoint CPU sets when there are at least 2 CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return str(cpus[0]), str(cpus[0])
    half = len(cpus) // 2
    return ",".join(map(str, cpus[:half])), ",".join(map(str, cpus[half:]))


def pinned(cmd: list[str], cpus: str | None) -> list[str]:
    """Prefix ``cmd`` with taskset when a CPU set is given and taskset exists."""
    if cpus and shutil.which("taskset"):
        return ["taskset", "-c", cpus] + list(cmd)
    return list(cmd)


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def process_tree(pid: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _proc_figures(pid: int) -> tuple[int, float]:
    """(VmHWM bytes, CPU seconds incl. reaped children) of one process; (0, 0) if it is gone."""
    hwm, cpu = 0, 0.0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rfind(")") + 2:].split()
        # utime, stime, cutime, cstime are fields 14..17 of stat (index 11..14 after the command)
        cpu = sum(int(x) for x in fields[11:15]) / _CLK_TCK
    except (OSError, ValueError, IndexError):
        pass
    return hwm, cpu


class Proc:
    """One started system: a process group with its output in a log file."""

    def __init__(self, name: str, cmd: list[str], *, env: dict | None = None, cwd: str | None = None,
                 cpus: str | None = None, log_path: str | None = None):
        self.name = name
        self.cmd = pinned(cmd, cpus)
        self.cpus = cpus
        self.log_path = log_path or tempfile.mkstemp(prefix=f"perfkit-{name}-", suffix=".log")[1]
        self.peak_rss = 0
        self.cpu_seconds = 0.0
        self._cpu_by_pid: dict[int, float] = {}
        self._log = open(self.log_path, "ab")
        exe = self.cmd[0]
        if os.sep not in exe and not shutil.which(exe):
            self._log.close()
            raise StartError(f"{name}: the command {exe!r} was not found")
        if os.sep in exe and not os.access(exe, os.X_OK):
            self._log.close()
            raise StartError(f"{name}: the binary {exe} does not exist or is not executable")
        try:
            self.popen = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        except OSError as e:
            self._log.close()
            raise StartError(f"{name}: cannot start {self.cmd[0]}: {e.strerror or e}") from None
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            self._log.flush()
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def sample(self) -> None:
        """Update peak RSS (sum of the tree's high-water marks) and CPU time from /proc."""
        if not self.alive():
            return
        total_hwm = 0
        for p in process_tree(self.pid):
            hwm, cpu = _proc_figures(p)
            total_hwm += hwm
            self._cpu_by_pid[p] = max(cpu, self._cpu_by_pid.get(p, 0.0))
        self.peak_rss = max(self.peak_rss, total_hwm)
        self.cpu_seconds = sum(self._cpu_by_pid.values())

    def wait_ready(self, url: str, timeout: float) -> float:
        """Poll ``url`` (http://… answering 2xx, or tcp://host:port accepting) until ready; seconds taken."""
        return wait_ready(self.name, url, timeout, self)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM the process group, SIGKILL after ``timeout``; returns the exit status."""
        try:
            self.sample()
            if self.alive():
                try:
                    os.killpg(self.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    self.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(self.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.popen.wait(5)
            else:
                # the leader is gone: make sure nothing of its group lingers
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            return self.popen.returncode
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if not self._log.closed:
                self._log.close()


def ready_now(url: str) -> str | None:
    """None when ``url`` answers (http://… with a 2xx, tcp://host:port by accepting), else why not."""
    try:
        if url.startswith("tcp://"):
            host, port = url[6:].rstrip("/").rsplit(":", 1)
            with socket.create_connection((host.strip("[]"), int(port)), timeout=0.5):
                return None
        with urllib.request.urlopen(url, timeout=1.0) as r:
            return None if 200 <= r.status < 300 else f"HTTP {r.status}"
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}"
    except (OSError, ValueError) as e:
        return str(getattr(e, "reason", e))


def wait_ready(name: str, url: str, timeout: float, proc: Proc | None = None) -> float:
    """Poll ``url`` until it answers (see ready_now); seconds taken. StartError when ``proc`` exits first or the
    time runs out."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise StartError(f"{name} exited with status {proc.popen.returncode} before it was ready",
                             proc.log_tail())
        last = ready_now(url)
        if last is None:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise StartError(f"{name} was not ready at {url} within {timeout:.0f} s (last: {last})",
                     proc.log_tail() if proc else "")


def stop_all() -> None:
    """Stop every process started through this module (Ctrl-C path)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for p in procs:
        try:
            p.stop(timeout=3.0)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
