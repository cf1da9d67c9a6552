"""Credentials from .netrc (the file named by NETRC, else ~/.netrc) when trust_env is on and no auth is given."""

from __future__ import annotations

import pytest

import requestx_client as requests
from requestx_client.utils import get_auth_from_url, get_netrc_auth


@pytest.fixture()
def netrc_file(tmp_path, monkeypatch):
    path = tmp_path / "netrc"
    path.write_text("machine 127.0.0.1 login u password p\nmachine other.example login o password q\n")
    monkeypatch.setenv("NETRC", str(path))
    return path


def test_get_netrc_auth(netrc_file):
    assert get_netrc_auth("http://127.0.0.1:8080/x") == ("u", "p")
    assert get_netrc_auth("https://other.example/") == ("o", "q")
    assert get_netrc_auth("http://unknown.example/") is None


def test_netrc_default_entry(tmp_path, monkeypatch):
    path = tmp_path / "netrc-default"
    path.write_text("default login anyone password any\n")
    monkeypatch.setenv("NETRC", str(path))
    assert get_netrc_auth("http://whatever.example/") == ("anyone", "any")


def test_no_netrc_file(tmp_path, monkeypatch):
    monkeypatch.setenv("NETRC", str(tmp_path / "missing"))
    assert get_netrc_auth("http://127.0.0.1/") is None


def test_unparsable_netrc(tmp_path, monkeypatch):
    path = tmp_path / "bad"
    path.write_text("machine\n")
    monkeypatch.setenv("NETRC", str(path))
    assert get_netrc_auth("http://127.0.0.1/") is None
    with pytest.raises(Exception):
        get_netrc_auth("http://127.0.0.1/", raise_errors=True)


def test_home_netrc(tmp_path, monkeypatch):
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login h password hp\n")
    assert get_netrc_auth("http://127.0.0.1/") == ("h", "hp")


def test_requests_use_netrc(server, netrc_file):
    assert requests.get(server.url + "/basic-auth/u/p").json() == {"authenticated": True}
    with requests.Session() as s:
        assert s.get(server.url + "/basic-auth/u/p").ok
    with requests.Session(trust_env=False) as s:
        assert s.get(server.url + "/basic-auth/u/p").status_code == 401
    # given credentials win over the file: explicit or the session's
    assert requests.get(server.url + "/basic-auth/u/p", auth=("u", "x")).status_code == 401
    with requests.Session(auth=("u", "x")) as s:
        assert s.get(server.url + "/basic-auth/u/p").status_code == 401
    # but the file wins over credentials in the URL, as in requests (its test_basicauth_with_netrc_leak)
    url = server.url.replace("http://", "http://u:x@") + "/basic-auth/u/p"
    assert requests.get(url).status_code == 200
    with requests.Session(trust_env=False) as s:
        assert s.get(url).status_code == 401


def test_get_auth_from_url():
    assert get_auth_from_url("http://a%40b:c%3Ad@h/") == ("a@b", "c:d")
    assert get_auth_from_url("http://h/") == ("", "")
