"""The original aquilia peer, started exactly as the bench starts it (its scenario entry, perfkit's runner),
serves the same bodies as aquilia_app on /ping, /json, /json-large and /html, over real sockets."""

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
            if s.name in ("aquilia_app", "aquilia"):
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


@pytest.mark.parametrize("path", ENDPOINTS)
def test_same_bytes_as_aquilia_app(servers, path):
    ours = get(servers["aquilia_app"].port, path)
    theirs = get(servers["aquilia"].port, path)
    assert ours[0] == theirs[0] == 200
    assert theirs[2] == ours[2], f"{path}: {len(theirs[2])} B vs {len(ours[2])} B"
    # same kind of content (aquilia adds "; charset=utf-8" to application/json)
    assert theirs[1].split(";")[0] == ours[1].split(";")[0]


def test_the_original_really_is_aquilia(servers):
    assert servers["aquilia"].version == importlib.metadata.version("aquilia")
    # its own middleware answers: the scaffold's minimal chain adds a request id to every response
    with urllib.request.urlopen(f"http://127.0.0.1:{servers['aquilia'].port}/ping", timeout=10) as r:
        assert r.headers["x-request-id"]
