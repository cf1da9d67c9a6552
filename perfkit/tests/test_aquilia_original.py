"""Every system of the aquilia_app scenario (the original aquilia, Sanic, FastAPI, BlackSheep, the raw ASGI
floors, aquilia_app with metrics off), started exactly as the bench starts it (its scenario entry,
perfkit's runner), serves the same bodies as aquilia_app on /ping, /json, /json-large and /html, over
real sockets."""

import importlib.metadata
import os
import urllib.request

import pytest
from conftest import PEERS, PERFKIT_DIR

from perfkit.runner import Settings, Started, start_system
from perfkit.scenarios import Registry

ENDPOINTS = ["/ping", "/json", "/json-large", "/html"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    sc = Registry.load(os.path.join(PERFKIT_DIR, "scenarios")).get("aquilia_app")
    settings = Settings(peers_dir=PEERS, work_dir=str(tmp_path_factory.mktemp("systems")))
    started = {}
    try:
        for s in sc.systems:
            st = started[s.name] = Started(s)
            start_system(st, settings, None)
            assert st.ok, f"{s.name}: {st.error}\n{st.log_tail}"
        yield started
    finally:
        for st in started.values():
            if st.proc is not None:
                st.proc.stop()


def get(port: int, path: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.status, r.headers["content-type"], r.read()


def test_the_original_is_registered_as_such():
    sc = Registry.load(os.path.join(PERFKIT_DIR, "scenarios")).get("aquilia_app")
    s = {m.name: m for m in sc.systems}["aquilia"]
    assert s.role == "original" and s.version.dist == "aquilia"
    assert os.path.isfile(os.path.join(PEERS, "aquilia_original", "workspace.py"))


PEERS_OF_AQUILIA_APP = ["aquilia", "sanic", "fastapi", "blacksheep", "raw-asgi-uvicorn", "raw-asgi-granian",
                        "raw-rsgi-granian", "aquilia_app-nometrics", "aquilia_app-asgi"]


def test_every_system_is_checked():
    sc = Registry.load(os.path.join(PERFKIT_DIR, "scenarios")).get("aquilia_app")
    assert sorted(s.name for s in sc.systems) == sorted(["aquilia_app"] + PEERS_OF_AQUILIA_APP)


@pytest.mark.parametrize("peer", PEERS_OF_AQUILIA_APP)
@pytest.mark.parametrize("path", ENDPOINTS)
def test_same_bytes_as_aquilia_app(servers, path, peer):
    ours = get(servers["aquilia_app"].port, path)
    theirs = get(servers[peer].port, path)
    assert ours[0] == theirs[0] == 200
    assert theirs[2] == ours[2], f"{peer} {path}: {len(theirs[2])} B vs {len(ours[2])} B"
    # same kind of content (some add "; charset=utf-8" to application/json)
    assert theirs[1].split(";")[0] == ours[1].split(";")[0], f"{peer} {path}"


def test_the_original_really_is_aquilia(servers):
    assert servers["aquilia"].version == importlib.metadata.version("aquilia")
    # its own middleware answers: the scaffold's minimal chain adds a request id to every response
    with urllib.request.urlopen(f"http://127.0.0.1:{servers['aquilia'].port}/ping", timeout=10) as r:
        assert r.headers["x-request-id"]
