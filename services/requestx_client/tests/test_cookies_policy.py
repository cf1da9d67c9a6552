"""The cookie policy (public suffixes, Secure, expiry, redirect hops), the RequestsCookieJar API and
when Authorization survives a redirect.

Only loopback is reachable here, so the rules about host names are checked on the jar itself (pure
Python) with made-up URLs; the rest goes through real local servers."""

from __future__ import annotations

import time
from http.cookiejar import CookieJar
from http.cookies import SimpleCookie
from urllib.parse import quote

import pytest

import requestx_client as requests
from requestx_client.cookies import (
    CookieConflictError, CookieRequest, CookieResponse, PublicSuffixCookiePolicy, RequestsCookieJar,
    cookiejar_from_dict, create_cookie, merge_cookies, morsel_to_cookie, remove_cookie_by_name,
)
from servers import Server

PAST = "Thu, 01 Jan 1970 00:00:00 GMT"
FUTURE = "Wed, 21 Oct 2037 07:28:00 GMT"


def jar_from(url: str, *set_cookie: str) -> RequestsCookieJar:
    jar = RequestsCookieJar()
    jar.extract(list(set_cookie), url)
    return jar


def sent(jar: RequestsCookieJar, url: str) -> set[str]:
    """The name=value pairs the jar sends to ``url``."""
    header = jar.header_for(url)
    return set(header.split("; ")) if header else set()


# --- domains ---

@pytest.mark.parametrize("url, domain", [
    ("http://www.example.com/", "com"),
    ("http://www.example.com/", ".com"),
    ("http://shop.example.co.uk/", "co.uk"),
    ("http://me.github.io/", "github.io"),
    ("http://a.example.test/", "test"),  # a name the list does not know counts as a public suffix
])
def test_domain_naming_a_public_suffix_is_refused(url, domain):
    assert len(jar_from(url, f"sid=x; Domain={domain}")) == 0


def test_domain_below_a_public_suffix_is_kept():
    jar = jar_from("http://shop.example.co.uk/", "sid=x; Domain=example.co.uk")
    assert jar.list_domains() == [".example.co.uk"]
    assert sent(jar, "http://example.co.uk/") == {"sid=x"}
    assert sent(jar, "http://other.co.uk/") == set()


def test_domain_cookie_goes_to_subdomains_and_host_cookie_to_its_host_only():
    jar = jar_from("http://example.test/", "dom=1; Domain=example.test", "host=2")
    assert sent(jar, "http://example.test/") == {"dom=1", "host=2"}
    assert sent(jar, "http://sub.example.test/") == {"dom=1"}
    assert sent(jar, "http://other.test/") == set()
    assert sent(jar, "http://notexample.test/") == set()
    # nor may a site set a cookie for a sibling or a parent's other child
    assert len(jar_from("http://a.example.test/", "x=1; Domain=b.example.test")) == 0
    assert len(jar_from("http://evil.test/", "x=1; Domain=example.test")) == 0


def test_another_site_cannot_delete_a_domain_cookie():
    jar = jar_from("http://bank.test/", "sid=1; Domain=bank.test; Path=/")
    jar.extract(["sid=; Domain=bank.test; Path=/; Max-Age=0"], "http://evil.test/")
    assert jar.get_dict() == {"sid": "1"}
    jar.extract(["sid=; Domain=bank.test; Path=/; Max-Age=0"], "http://www.bank.test/")
    assert jar.get_dict() == {}


# --- Secure ---

def test_secure_cookie_over_http_is_refused():
    assert len(jar_from("http://example.test/", "s=1; Secure")) == 0
    assert jar_from("https://example.test/", "s=1; Secure").get_dict() == {"s": "1"}


def test_secure_cookie_is_sent_over_https_only():
    jar = jar_from("https://example.test/", "s=1; Secure", "plain=2")
    assert sent(jar, "https://example.test/") == {"s=1", "plain=2"}
    assert sent(jar, "http://example.test/") == {"plain=2"}


def test_http_cannot_replace_or_delete_a_secure_cookie():
    jar = jar_from("https://example.test/", "s=1; Secure; Path=/")
    jar.extract(["s=evil; Path=/", "s=; Path=/; Max-Age=0"], "http://example.test/")
    assert [(c.name, c.value, c.secure) for c in jar] == [("s", "1", True)]


# --- expiry ---

def test_expires_and_max_age():
    url = "http://example.test/"
    assert len(jar_from(url, f"old=1; Expires={PAST}")) == 0
    [c] = jar_from(url, f"e=1; Expires={FUTURE}")
    assert c.expires == 2139722880
    [c] = jar_from(url, "m=1; Max-Age=3600")
    assert abs(c.expires - (time.time() + 3600)) < 5
    # Max-Age wins over Expires, in either order
    assert jar_from(url, f"m=1; Expires={PAST}; Max-Age=3600").get_dict() == {"m": "1"}
    assert len(jar_from(url, f"m=1; Max-Age=0; Expires={FUTURE}")) == 0
    # an expired Set-Cookie deletes the stored cookie
    jar = jar_from(url, "a=1", "b=2")
    jar.extract(["a=; Max-Age=0"], url)
    assert jar.get_dict() == {"b": "2"}
    # a cookie is not sent once its time is up (http.cookiejar's clock counts whole seconds, hence 2 s)
    jar = jar_from(url, "short=1; Max-Age=2", "long=2; Max-Age=60")
    jar.set_cookie(create_cookie("gone", "3", domain="example.test", expires=time.time() + 1))
    assert sent(jar, url) == {"short=1", "long=2", "gone=3"}
    time.sleep(2.05)
    assert sent(jar, url) == {"long=2"}


# --- the jar's API, as requests' RequestsCookieJar ---

def test_requests_cookie_jar_api():
    jar = RequestsCookieJar()
    jar["a"] = "1"
    jar.set("a", "2", domain="x.test", path="/p")
    jar.set("b", 3, domain="x.test", secure=True)
    assert len(jar) == 3 and "a" in jar and "zz" not in jar
    with pytest.raises(CookieConflictError):
        jar["a"]
    assert jar.get("a", domain="x.test") == "2" and jar.get("a", path="/") == "1"
    assert jar.get("zz", "dflt") == "dflt"
    assert jar.keys() == ["a", "a", "b"] and jar.values() == ["1", "2", "3"]
    assert jar.items() == [("a", "1"), ("a", "2"), ("b", "3")]
    assert jar.list_domains() == ["", "x.test"] and jar.list_paths() == ["/", "/p"]
    assert jar.multiple_domains() and not cookiejar_from_dict({"k": "v"}).multiple_domains()
    assert jar.get_dict(domain="x.test") == {"a": "2", "b": "3"} and jar.get_dict(path="/p") == {"a": "2"}
    assert all(c.name in ("a", "b") for c in jar)  # iterating yields the Cookie objects
    copy = jar.copy()
    assert copy is not jar and copy.items() == jar.items()
    assert isinstance(copy.get_policy(), PublicSuffixCookiePolicy)
    jar.set("a", None, domain="x.test")  # a value of None removes
    assert jar["a"] == "1"
    del jar["a"]
    with pytest.raises(KeyError):
        del jar["a"]
    jar.update({"c": "4"})
    jar.update(cookiejar_from_dict({"d": "5"}))
    assert jar.get_dict() == {"b": "3", "c": "4", "d": "5"}
    remove_cookie_by_name(jar, "c")
    assert set(jar.get_dict()) == {"b", "d"} and len(copy) == 3
    jar.clear()
    assert not jar and len(jar) == 0


def test_cookie_helpers():
    jar = cookiejar_from_dict({"a": "1"})
    cookiejar_from_dict({"a": "2", "b": "2"}, jar, overwrite=False)
    assert jar.get_dict() == {"a": "1", "b": "2"}
    merge_cookies(jar, {"a": "3", "c": "3"})  # a dict does not override a name already there
    assert jar.get_dict() == {"a": "1", "b": "2", "c": "3"}
    merge_cookies(jar, cookiejar_from_dict({"d": "4"}))
    assert jar["d"] == "4"
    with pytest.raises(ValueError):
        merge_cookies({}, jar)  # type: ignore[arg-type]
    c = create_cookie("n", "v", domain=".x.test", path="/p", secure=True)
    assert (c.domain, c.domain_specified, c.domain_initial_dot, c.path, c.secure) == (".x.test", True, True, "/p", True)
    with pytest.raises(TypeError):
        create_cookie("n", "v", colour="red")
    morsel = SimpleCookie("k=v; Max-Age=100; Path=/p; Domain=.x.test; Secure")["k"]
    c = morsel_to_cookie(morsel)
    assert (c.name, c.value, c.domain, c.path, c.secure) == ("k", "v", ".x.test", "/p", True)
    assert abs(c.expires - (time.time() + 100)) < 5
    assert morsel_to_cookie(SimpleCookie(f"k=v; expires={FUTURE}")["k"]).expires == 2139722880
    jar = RequestsCookieJar()
    jar.set("m", SimpleCookie("m=from-morsel")["m"])
    assert jar["m"] == "from-morsel"


def test_adapters_with_a_plain_cookiejar():
    """The adapter objects are what CookieJar.extract_cookies / add_cookie_header call."""
    jar = CookieJar(PublicSuffixCookiePolicy())
    jar.extract_cookies(CookieResponse(["ok=1; Path=/", "bad=1; Domain=co.uk"]),  # type: ignore[arg-type]
                        CookieRequest("http://u:p@shop.example.co.uk/a/b"))
    assert [(c.name, c.domain) for c in jar] == [("ok", "shop.example.co.uk")]
    req = CookieRequest("http://shop.example.co.uk/x")
    jar.add_cookie_header(req)  # type: ignore[arg-type]
    assert req.new_headers == {"cookie": "ok=1"}
    mine = CookieRequest("http://shop.example.co.uk/x", {"Cookie": "mine=1"})
    jar.add_cookie_header(mine)  # type: ignore[arg-type]
    assert mine.new_headers == {}  # an explicit Cookie header is left alone


# --- through real servers ---

def test_cookies_set_on_a_redirect_hop_reach_the_next_hop(server):
    # the module-level functions keep no cookies, yet a cookie set by a hop goes to the next ones
    assert requests.get(server.url + "/cookies/set?z=9").json()["cookie"] == "z=9"
    assert requests.get(server.url + "/cookies").json()["cookie"] is None
    with Server() as other:
        hop = f"{server.url}/set-cookie?h=hop%3D1%3B%20Path%3D%2F&next={quote(other.url + '/cookies')}"
        assert requests.get(hop).json()["cookie"] == "hop=1"
        with requests.Session() as s:
            assert s.get(hop, cookies={"own": "2"}).json()["cookie"] == "hop=1; own=2"
            assert s.cookies.get_dict() == {"hop": "1"}


def test_host_cookie_not_sent_to_another_host_name(server):
    with requests.Session() as s:
        s.get(server.url + "/cookies/set?a=1")
        assert s.get(server.url + "/cookies").json()["cookie"] == "a=1"
        assert s.get(server.localhost_url + "/cookies").json()["cookie"] is None  # 127.0.0.1 != localhost


def test_secure_cookie_through_real_servers(server, tls_server, ca_file):
    secure = "/set-cookie?h=" + quote("s=1; Secure; Path=/")
    with requests.Session(verify=ca_file) as s:
        s.get(server.url + secure)
        assert len(s.cookies) == 0  # set over http: refused
        s.get(tls_server.url + secure)
        assert s.cookies.get_dict() == {"s": "1"}
        assert s.get(tls_server.url + "/cookies").json()["cookie"] == "s=1"
        assert s.get(server.url + "/cookies").json()["cookie"] is None  # same host, plain http


# --- Authorization on redirects ---

@pytest.mark.parametrize("old, new, strip", [
    ("http://h/a", "http://h/b", False),
    ("http://h:8080/", "http://h:8080/x", False),
    ("http://h:80/", "http://h/", False),  # a default port is the same as none
    ("https://h/", "https://h:443/", False),
    ("http://H/", "http://h/", False),  # host names compare case-insensitively
    ("http://h/", "https://h/", False),  # http -> https on the default ports
    ("http://h:80/", "https://h:443/", False),
    ("http://h:8080/", "https://h/", True),
    ("http://h/", "https://h:8443/", True),
    ("https://h/", "http://h/", True),
    ("http://h:8080/", "http://h:8081/", True),
    ("http://h/", "http://h:8080/", True),
    ("https://h/", "https://h:8443/", True),
    ("http://h/", "http://other/", True),
    ("http://h/", "http://sub.h/", True),
])
def test_should_strip_auth(old, new, strip):
    assert requests.Session().should_strip_auth(old, new) is strip


def test_authorization_not_forwarded_when_only_the_port_changes(server):
    same = requests.get(server.url + "/redirect-to?url=/echo", headers={"Authorization": "secret"})
    assert same.json()["headers"]["Authorization"] == "secret"
    with Server() as other, requests.Session(auth=("u", "p")) as s:
        target = other.url + "/echo"
        assert target.startswith("http://127.0.0.1:") and other.port != server.port
        r = s.get(server.url + "/redirect-to?url=" + quote(target))
        assert r.url == target and [h.status_code for h in r.history] == [302]
        assert r.history[0].request.headers["Authorization"].startswith("Basic ")
        assert "Authorization" not in r.json()["headers"]
