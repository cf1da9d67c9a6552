"""results.json: the document (every figure, versions, CPU sets, machine info, git commit), its JSON
schema (perfkit/results.schema.json) and validation."""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import subprocess
import sys

SCHEMA_ID = "perfkit-bench/results/v1"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results.schema.json")


class ResultsError(ValueError):
    """A results file is missing, unreadable or does not match the schema."""


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_commit() -> str:
    for d in (os.environ.get("BUILD_WORKSPACE_DIRECTORY"), os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        if not d:
            continue
        try:
            out = subprocess.run(["git", "-C", d, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
            if out.returncode == 0 and out.stdout.strip():
                dirty = subprocess.run(["git", "-C", d, "status", "--porcelain", "--untracked-files=no"],
                                       capture_output=True, text=True, timeout=5).stdout.strip()
                return out.stdout.strip() + ("-dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            continue
    return "unknown"


def machine() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count() or 1, "cpu_model": model,
            "kernel": platform.release(), "python": sys.version.split()[0], "memory_bytes": mem}


def new_document(suite: str, settings: dict, cpu_sets: dict, load_engine: dict, command: list[str]) -> dict:
    return {"schema": SCHEMA_ID, "created": now_iso(), "suite": suite, "interrupted": False,
            "git_commit": git_commit(), "command": command, "machine": machine(), "cpu_sets": cpu_sets,
            "settings": settings, "load_engine": load_engine, "scenarios": []}


def schema() -> dict:
    with open(SCHEMA_PATH) as f:
        return json.load(f)


def validate(doc: dict) -> None:
    """Raise ResultsError naming the first place where ``doc`` does not match the schema."""
    import jsonschema

    try:
        jsonschema.validate(doc, schema(), cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        raise ResultsError(f"results do not match the schema at {where}: {e.message}") from None


def write(doc: dict, out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "results.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)
    return path


def load(path: str) -> dict:
    """Read and validate a results.json (a folder holding one is accepted too)."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise ResultsError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ResultsError(f"{path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        raise ResultsError(f"{path} is not a perfkit results file (schema {SCHEMA_ID!r} expected)")
    try:
        validate(doc)
    except ResultsError as e:
        raise ResultsError(f"{path}: {e}") from None
    return doc
