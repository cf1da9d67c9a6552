"""Prometheus file-based service discovery: one target file per running system and per load run.

With a directory given (``perfkit --prom-sd-dir DIR`` or ``PERFKIT_PROM_SD_DIR``), the bench writes
``DIR/<job>-<service>-<pid>-<n>.json`` while a system with a ``metrics`` URL runs, and while each load-engine run
serves its metrics, in the format of Prometheus's ``file_sd_configs``::

    [{"targets": ["127.0.0.1:41234"], "labels": {"job": "perfkit_load", "service": "aurora_app"}}]

and removes it when the process stops. dashboards/prometheus/prometheus.yml reads ``dashboards/prometheus/sd/*.json``.
Without a directory nothing is written. A file is written whole under a temporary name (``.json.tmp``, which the
``*.json`` pattern does not match) and renamed, so Prometheus never reads half a file; files still registered
when the interpreter exits are removed then.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import re
import threading
import urllib.parse

ENV = "PERFKIT_PROM_SD_DIR"
LOAD_JOB = "perfkit_load"  # the job of load-engine targets (dashboards' TargetDown leaves it out)

_LIVE: set[str] = set()
_LOCK = threading.Lock()
_SEQ = itertools.count(1)


def directory(option: str | None) -> str | None:
    """The target-file directory: the option, else $PERFKIT_PROM_SD_DIR, else None (write nothing)."""
    return option or os.environ.get(ENV) or None


def url_target(url: str) -> tuple[str, dict]:
    """``http://HOST:PORT/path`` -> ("HOST:PORT", labels for a path other than /metrics and for https)."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"{url!r}: a metrics URL is http(s)://HOST[:PORT]/PATH")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    port = u.port or (443 if u.scheme == "https" else 80)
    extra = {}
    if u.path and u.path != "/metrics":
        extra["__metrics_path__"] = u.path
    if u.scheme == "https":
        extra["__scheme__"] = "https"
    return f"{host}:{port}", extra


def addr_target(addr: str) -> str:
    """A listen address (``HOST:PORT``) as a scrape target: a wildcard host becomes loopback."""
    host, _, port = addr.rpartition(":")
    host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}.get(host, host)
    return f"{host}:{port}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60] or "x"


class Registration:
    """One target file; ``remove()`` (idempotent) deletes it."""

    def __init__(self, path: str):
        self.path = path

    def remove(self) -> None:
        with _LOCK:
            _LIVE.discard(self.path)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __enter__(self) -> "Registration":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register(sd_dir: str | None, target: str, *, job: str, service: str, labels: dict | None = None
             ) -> Registration | None:
    """Write the target file for ``target`` (``HOST:PORT``) with labels job and service; None without a directory.
    A directory that cannot be written is an error (OSError): the caller asked for the files."""
    if not sd_dir:
        return None
    os.makedirs(sd_dir, exist_ok=True)
    all_labels = {"job": job, "service": service, **(labels or {})}
    name = f"{_safe(job)}-{_safe(service)}-{os.getpid()}-{next(_SEQ)}.json"
    path = os.path.join(sd_dir, name)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump([{"targets": [target], "labels": all_labels}], f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    with _LOCK:
        _LIVE.add(path)
    return Registration(path)


def register_system(sd_dir: str | None, name: str, metrics_url: str) -> Registration | None:
    """A running system of the bench: its /metrics URL, job and service both the system's name."""
    if not sd_dir:
        return None
    target, extra = url_target(metrics_url)
    return register(sd_dir, target, job=name, service=name, labels=extra)


def register_load(sd_dir: str | None, metrics_addr: str, service: str) -> Registration | None:
    """A load-engine run serving metrics on ``metrics_addr``, aimed at the system ``service``."""
    if not sd_dir:
        return None
    return register(sd_dir, addr_target(metrics_addr), job=LOAD_JOB, service=service)


@atexit.register
def _remove_leftovers() -> None:
    with _LOCK:
        paths = list(_LIVE)
    for p in paths:
        Registration(p).remove()
