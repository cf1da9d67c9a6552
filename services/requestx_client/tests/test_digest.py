"""HTTPDigestAuth (RFC 7616) against a digest-protected route of the test server, which checks the answer
on its own: MD5, MD5-sess, SHA-256, SHA-256-sess, SHA-512-256, qop=auth and no qop, nonce counting,
stale nonces, cookies of the 401, redirects."""

from __future__ import annotations

import io
from urllib.parse import quote

import pytest

import requestx_client as requests
from requestx_client.auth import HTTPDigestAuth
from requestx_client.digest import parse_challenges


@pytest.mark.parametrize("qop, algorithm", [
    ("auth", "MD5"), ("auth", "MD5-sess"), ("auth", "SHA-256"), ("auth", "SHA-256-sess"), ("auth", "SHA-512-256"),
    ("none", "MD5"), ("none", "SHA-256"),
])
def test_digest_algorithms(server, qop, algorithm):
    url = f"{server.url}/digest/{qop}/{algorithm}/user/pass word"
    r = requests.get(url, auth=HTTPDigestAuth("user", "pass word"))
    assert r.status_code == 200 and r.json()["authenticated"] is True
    assert [h.status_code for h in r.history] == [401]  # the challenge, then one answer
    assert r.request.headers["Authorization"].startswith('Digest username="user"')
    assert r.history[0].request.headers.get("Authorization") is None


def test_challenges_not_answered(server):
    # -sess needs a client nonce, which goes only with qop; an unknown algorithm cannot be computed
    for path in ("/digest/none/MD5-sess/u/p", "/digest/auth/SHA-999/u/p"):
        r = requests.get(server.url + path, auth=HTTPDigestAuth("u", "p"))
        assert r.status_code == 401 and r.history == []


def test_wrong_password_answers_once(server):
    r = requests.get(server.url + "/digest/auth/MD5/user/secret", auth=HTTPDigestAuth("user", "wrong"))
    assert r.status_code == 401 and len(r.history) == 1


def test_nonce_reused_and_counted(server):
    auth = HTTPDigestAuth("u", "p")
    with requests.Session() as s:
        first = s.get(server.url + "/digest/auth/SHA-256/u/p", auth=auth)
        assert first.ok and first.json()["nc"] == 1 and len(first.history) == 1
        # the next requests answer at once with the same nonce and the next count
        for n in (2, 3):
            r = s.get(server.url + "/digest/auth/SHA-256/u/p?again=1", auth=auth)
            assert r.ok and r.json()["nc"] == n and r.history == []
            assert f"nc={n:08x}" in r.request.headers["Authorization"]


def test_stale_nonce_is_replaced(server):
    auth = HTTPDigestAuth("u", "p")
    url = server.url + "/digest/auth/MD5/u/p?uses=1"
    with requests.Session(auth=auth) as s:
        assert s.get(url).ok
        r = s.get(url)  # the server refuses the used nonce (stale) and gives a new one: answered once more
        assert r.ok and r.json()["nc"] == 1 and [h.status_code for h in r.history] == [401]


def test_session_auth_post_body_and_cookies_of_the_401(server):
    with requests.Session(auth=HTTPDigestAuth("u", "p")) as s:
        r = s.post(server.url + "/digest/auth/MD5/u/p?cookie=1", data=b"payload")
        assert r.ok and r.json()["cookie"] == "probe=1"  # the cookie the 401 set went with the answer
        assert r.request.body == b"payload" and s.cookies.get("probe") == "1"


def test_a_file_body_is_sent_again_with_the_answer(server):
    f = io.BytesIO(b"skip:payload")
    f.read(5)  # sent from where it is, for the 401 and again for the answer
    r = requests.post(server.url + "/digest/auth/MD5/u/p", data=f, auth=HTTPDigestAuth("u", "p"))
    assert r.ok and r.json()["body"] == "payload" and [h.status_code for h in r.history] == [401]


def test_redirect_to_a_digest_route(server):
    target = "/digest/auth/MD5/u/p"
    r = requests.get(server.url + "/redirect-to?url=" + quote(target), auth=HTTPDigestAuth("u", "p"))
    assert r.ok and r.url == server.url + target
    assert [h.status_code for h in r.history] == [302, 401]


def test_not_a_digest_challenge(server):
    r = requests.get(server.url + "/basic-auth/u/p", auth=HTTPDigestAuth("u", "p"))
    assert r.status_code == 401 and r.history == []


def test_parse_challenges():
    got = parse_challenges('Basic realm="a, b", Digest realm="r", nonce="n\\"1", qop="auth,auth-int", '
                           'algorithm=SHA-256, stale=TRUE, Bearer error="invalid"')
    assert got["basic"] == {"realm": "a, b"}
    assert got["digest"] == {"realm": "r", "nonce": 'n"1', "qop": "auth,auth-int", "algorithm": "SHA-256",
                             "stale": "TRUE"}
    assert got["bearer"] == {"error": "invalid"}


class _RfcExample(HTTPDigestAuth):
    """The example exchange of RFC 7616 section 3.9.1, with its client nonce."""

    def __init__(self, algorithm):
        super().__init__("Mufasa", "Circle of Life")
        self._state().chal = {"realm": "http-auth@example.org", "qop": "auth, auth-int", "algorithm": algorithm,
                              "nonce": "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
                              "opaque": "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"}

    def _new_cnonce(self, nonce, nc):
        return "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"


@pytest.mark.parametrize("algorithm, response", [
    ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
    ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
])
def test_rfc_7616_example(algorithm, response):
    value = _RfcExample(algorithm).build_digest_header("GET", "http://www.example.org/dir/index.html")
    assert value.startswith('Digest username="Mufasa", realm="http-auth@example.org"')
    assert f'response="{response}"' in value and f"algorithm={algorithm}" in value
    assert 'uri="/dir/index.html"' in value and 'qop="auth", nc=00000001' in value
    assert 'cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"' in value
    assert 'opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"' in value
