"""Cookies as requests keeps them: an ``http.cookiejar.CookieJar`` with a dict-like face
(``RequestsCookieJar``) and the standard library's policy, made stricter as browsers are: a Domain
attribute that names a public suffix (com, co.uk, github.io, ...) is refused, and so is a Secure
cookie sent over plain http. http.cookiejar already sends Secure cookies over https only."""

from __future__ import annotations

import copy as _copy
import functools
import ipaddress
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping
from http.cookiejar import Cookie, CookieJar, DefaultCookiePolicy, eff_request_host, http2time
from http.cookies import Morsel
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from publicsuffixlist import PublicSuffixList


@functools.cache
def _public_suffixes() -> PublicSuffixList:
    # Parsing the bundled list takes ~60 ms: done on the first Domain attribute, not at import.
    return PublicSuffixList()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


class PublicSuffixCookiePolicy(DefaultCookiePolicy):
    """``DefaultCookiePolicy`` plus three browser rules: no cookie for a whole public suffix (else one
    site could set a cookie that every other site under ``.com`` receives), no Secure cookie from an
    insecure origin (else a network attacker could plant or overwrite a Secure cookie), and a cookie
    set without Domain goes back to its own host only, not to the subdomains."""

    def set_ok(self, cookie: Cookie, request: Any) -> bool:
        if cookie.secure and request.type not in self.secure_protocols:
            return False
        return super().set_ok(cookie, request)

    def set_ok_domain(self, cookie: Cookie, request: Any) -> bool:
        if not super().set_ok_domain(cookie, request):
            return False
        if cookie.domain_specified:
            domain = cookie.domain.lstrip(".").lower()
            # Unknown top-level names (intranet "corp", "test") count as public suffixes too.
            if not _is_ip(domain) and _public_suffixes().is_public(domain):
                return False
        return True

    def return_ok_domain(self, cookie: Cookie, request: Any) -> bool:
        if cookie.domain and not cookie.domain_specified:  # host-only ("" is a cookie the caller set for any host)
            return cookie.domain == eff_request_host(request)[1]
        return super().return_ok_domain(cookie, request)


class CookieConflictError(RuntimeError):
    """More than one cookie matches a name (set ``domain``/``path`` to pick one)."""


# --- the adapter objects CookieJar.extract_cookies / add_cookie_header expect ---

class CookieRequest:
    """The ``urllib.request.Request`` methods that http.cookiejar calls, for one URL and its headers.
    A Cookie header computed by the jar lands in ``new_headers``."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]  # user:password@ must not be taken for the host
        self._url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        self.type = parts.scheme.lower()
        self.host = netloc
        self.origin_req_host = (parts.hostname or "").lower()
        self.unverifiable = False  # the user asked for this URL (redirects included, as requests has it)
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.new_headers: dict[str, str] = {}

    def get_full_url(self) -> str:
        return self._url

    def get_type(self) -> str:
        return self.type

    def get_host(self) -> str:
        return self.host

    def is_unverifiable(self) -> bool:
        return self.unverifiable

    def has_header(self, name: str) -> bool:
        return name.lower() in self._headers or name.lower() in self.new_headers

    def get_header(self, name: str, default: Any = None) -> Any:
        return self._headers.get(name.lower(), self.new_headers.get(name.lower(), default))

    def add_unredirected_header(self, name: str, value: str) -> None:
        self.new_headers[name.lower()] = value

    def header_items(self) -> list[tuple[str, str]]:
        return list({**self._headers, **self.new_headers}.items())


class CookieResponse:
    """The ``info().get_all()`` that http.cookiejar reads Set-Cookie headers through."""

    def __init__(self, set_cookie: list[str]) -> None:
        self._set_cookie = set_cookie

    def info(self) -> "CookieResponse":
        return self

    def get_all(self, name: str, default: Any = None) -> Any:
        return list(self._set_cookie) if name.lower() == "set-cookie" and self._set_cookie else default


def _set_cookie_values(response: Any) -> list[str]:
    native = getattr(response, "_native", response)  # a Response, or a native response
    return native.header_all("set-cookie") if native is not None else []


def extract_cookies_to_jar(jar: CookieJar, request: Any, response: Any) -> None:
    """Store in ``jar`` the cookies that ``response`` set, judged against the URL of ``request``
    (a PreparedRequest, or anything with ``url`` and ``headers``)."""
    values = _set_cookie_values(response)
    if values:
        adapter = CookieRequest(request.url, request.headers)
        jar.extract_cookies(CookieResponse(values), adapter)  # type: ignore[arg-type]


def get_cookie_header(jar: CookieJar, request: Any) -> str | None:
    """The Cookie header ``jar`` gives for ``request`` (``url`` and ``headers``), or None."""
    adapter = CookieRequest(request.url, request.headers)
    jar.add_cookie_header(adapter)  # type: ignore[arg-type]
    return adapter.new_headers.get("cookie")


# --- building cookies ---

_COOKIE_DEFAULTS: dict[str, Any] = {
    "version": 0, "port": None, "domain": "", "path": "/", "secure": False, "expires": None,
    "discard": True, "comment": None, "comment_url": None, "rest": None, "rfc2109": False,
}


def create_cookie(name: str, value: Any, **kwargs: Any) -> Cookie:
    """A ``Cookie`` for any domain and path "/" unless given (``domain=``, ``path=``, ``secure=``,
    ``expires=`` in unix time, ...); an unknown keyword is a TypeError."""
    unknown = set(kwargs) - set(_COOKIE_DEFAULTS)
    if unknown:
        raise TypeError(f"create_cookie() got unexpected keyword arguments: {sorted(unknown)}")
    a = {**_COOKIE_DEFAULTS, **kwargs}
    domain, path = a["domain"] or "", a["path"]
    return Cookie(a["version"], name, None if value is None else str(value), a["port"], a["port"] is not None,
                  domain, bool(domain), domain.startswith("."), path, bool(path), a["secure"], a["expires"],
                  a["discard"], a["comment"], a["comment_url"], a["rest"] or {"HttpOnly": None}, a["rfc2109"])


def morsel_to_cookie(morsel: Morsel) -> Cookie:
    """A ``Cookie`` from an ``http.cookies.Morsel`` (Max-Age wins over Expires). An Expires that is not
    a date string is a TypeError, one that is not a date a ValueError, as in requests."""
    expires = None
    if morsel["max-age"]:
        try:
            expires = int(time.time()) + int(morsel["max-age"])
        except ValueError:
            raise TypeError(f"max-age: {morsel['max-age']!r} must be an integer") from None
    elif morsel["expires"]:
        value = morsel["expires"]
        if not isinstance(value, str):
            raise TypeError(f"expires: {value!r} must be a date string")
        expires = http2time(value)
        if expires is None:
            raise ValueError(f"expires: {value!r} is not a date")
    return create_cookie(morsel.key, morsel.value, domain=morsel["domain"], path=morsel["path"] or "/",
                         secure=bool(morsel["secure"]), expires=expires, discard=False,
                         comment=morsel["comment"] or None, rest={"HttpOnly": morsel["httponly"]},
                         version=int(morsel["version"] or 0))


def remove_cookie_by_name(jar: CookieJar, name: str, domain: str | None = None, path: str | None = None) -> None:
    """Remove every cookie called ``name`` (only in ``domain``/``path`` when given)."""
    doomed = [(c.domain, c.path, c.name) for c in list(jar)
              if c.name == name and domain in (None, c.domain) and path in (None, c.path)]
    for key in doomed:
        jar.clear(*key)


def cookiejar_from_dict(cookie_dict: Mapping[str, Any] | None, cookiejar: CookieJar | None = None,
                        overwrite: bool = True) -> CookieJar:
    """Add ``name: value`` pairs to ``cookiejar`` (a new ``RequestsCookieJar`` when None); with
    ``overwrite=False`` a name already in the jar is left as it is."""
    jar = RequestsCookieJar() if cookiejar is None else cookiejar
    if cookie_dict:
        present = {c.name for c in list(jar)}
        for name, value in cookie_dict.items():
            if overwrite or name not in present:
                jar.set_cookie(create_cookie(name, value))
    return jar


def merge_cookies(cookiejar: CookieJar, cookies: Any) -> CookieJar:
    """Add ``cookies`` (a dict or a CookieJar) to ``cookiejar`` and return it."""
    if not isinstance(cookiejar, CookieJar):
        raise ValueError("cannot merge cookies into something that is not a CookieJar")
    if isinstance(cookies, CookieJar):
        for c in list(cookies):
            cookiejar.set_cookie(_copy.copy(c))
    elif cookies:
        cookiejar_from_dict(cookies, cookiejar, overwrite=False)
    return cookiejar


# --- the jar ---

class RequestsCookieJar(CookieJar, MutableMapping[str, str]):  # type: ignore[misc]
    """A ``CookieJar`` that is also a mapping of names to values, as ``requests.cookies.RequestsCookieJar``.
    Iterating yields the ``Cookie`` objects; ``keys()``/``items()`` give names. A name held for several
    domains or paths raises ``CookieConflictError`` unless ``domain``/``path`` narrow it down. Every read
    takes the jar's lock, so a session shared by threads is safe to inspect while responses arrive."""

    def __init__(self, policy: Any = None) -> None:
        super().__init__(policy if policy is not None else PublicSuffixCookiePolicy())

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_cookies_lock", None)  # a lock does not pickle: the copy gets its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cookies_lock = threading.RLock()

    def _all(self) -> list[Cookie]:
        with self._cookies_lock:
            return [c for paths in self._cookies.values() for names in paths.values() for c in names.values()]

    def __iter__(self) -> Iterator[Cookie]:  # type: ignore[override]
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:  # on every request: no list built for an empty jar
        return bool(self._cookies) and bool(self._all())

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self._all())

    def _find(self, name: str, domain: str | None = None, path: str | None = None) -> Cookie:
        found = [c for c in self._all()
                 if c.name == name and domain in (None, c.domain) and path in (None, c.path)]
        if not found:
            raise KeyError(f"name={name!r}, domain={domain!r}, path={path!r}")
        if len(found) > 1:
            raise CookieConflictError(f"there are {len(found)} cookies called {name!r}: give a domain and path")
        return found[0]

    def get(self, name: str, default: Any = None, domain: str | None = None,  # type: ignore[override]
            path: str | None = None) -> Any:
        try:
            return self._find(name, domain, path).value
        except KeyError:
            return default

    def __getitem__(self, name: str) -> str:
        return self._find(name).value  # type: ignore[return-value]

    def set(self, name: str, value: Any, **kwargs: Any) -> Cookie | None:
        """Set a cookie (``create_cookie`` keywords); a value of None removes the name instead."""
        if value is None:
            remove_cookie_by_name(self, name, domain=kwargs.get("domain"), path=kwargs.get("path"))
            return None
        c = morsel_to_cookie(value) if isinstance(value, Morsel) else create_cookie(name, value, **kwargs)
        self.set_cookie(c)
        return c

    def __setitem__(self, name: str, value: Any) -> None:
        self.set(name, value)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        remove_cookie_by_name(self, name)

    def keys(self) -> list[str]:  # type: ignore[override]
        return [c.name for c in self._all()]

    def values(self) -> list[str]:  # type: ignore[override]
        return [c.value for c in self._all()]  # type: ignore[misc]

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]
        return [(c.name, c.value) for c in self._all()]  # type: ignore[misc]

    # requests keeps the Python 2 spellings; code written against it still calls them
    def iterkeys(self) -> Iterator[str]:
        return iter(self.keys())

    def itervalues(self) -> Iterator[str]:
        return iter(self.values())

    def iteritems(self) -> Iterator[tuple[str, str]]:
        return iter(self.items())

    def list_domains(self) -> list[str]:
        return list(dict.fromkeys(c.domain for c in self._all()))

    def list_paths(self) -> list[str]:
        return list(dict.fromkeys(c.path for c in self._all()))

    def multiple_domains(self) -> bool:
        return len(self.list_domains()) > 1

    def get_dict(self, domain: str | None = None, path: str | None = None) -> dict[str, str]:
        return {c.name: c.value for c in self._all()  # type: ignore[misc]
                if domain in (None, c.domain) and path in (None, c.path)}

    def update(self, other: Any = (), **kw: Any) -> None:  # type: ignore[override]
        if isinstance(other, CookieJar):
            merge_cookies(self, other)
        else:
            MutableMapping.update(self, other, **kw)

    # --- storing: stricter than CookieJar's own ---
    def _cookie_from_cookie_tuple(self, tup: Any, request: Any) -> Cookie | None:
        # CookieJar deletes the stored cookie as soon as it parses an expired one, before the policy
        # is asked, so any site could delete another site's domain cookies. Build it as a live cookie
        # instead: extract_cookies then asks the policy, and set_cookie deletes.
        name, value, standard, rest = tup
        expires = standard.get("expires")
        if expires is None or expires > self._now:
            return super()._cookie_from_cookie_tuple(tup, request)  # type: ignore[misc]
        live = {k: v for k, v in standard.items() if k != "expires"}
        cookie = super()._cookie_from_cookie_tuple((name, value, live, rest), request)  # type: ignore[misc]
        if cookie is not None:
            cookie.expires, cookie.discard = expires, False
        return cookie

    def extract_cookies(self, response: Any, request: Any) -> None:
        with self._cookies_lock:
            for cookie in self.make_cookies(response, request):
                if self._policy.set_ok(cookie, request) and not self._shadows_secure(cookie, request):
                    self.set_cookie(cookie)

    def _shadows_secure(self, cookie: Cookie, request: Any) -> bool:
        """Leave Secure cookies alone: from plain http, no cookie may replace or delete a Secure cookie
        of the same name whose domain and path it covers (as browsers do)."""
        if request.type in getattr(self._policy, "secure_protocols", ("https", "wss")):
            return False
        new = cookie.domain.lstrip(".").lower()
        for old in self._all():
            if old.secure and old.name == cookie.name and old.path.startswith(cookie.path):
                dom = old.domain.lstrip(".").lower()
                if dom == new or dom.endswith("." + new) or new.endswith("." + dom):
                    return True
        return False

    def set_cookie(self, cookie: Cookie) -> None:
        """Store ``cookie``; an expired one deletes the cookie it names instead. A quoted value loses its
        escaped quotes (``"\\"a\\""`` is kept as ``"a"``), as requests keeps it."""
        value = cookie.value
        if isinstance(value, str) and value.startswith('"') and value.endswith('"') and '\\"' in value:
            cookie.value = value.replace('\\"', "")
        if cookie.is_expired():
            with self._cookies_lock:
                try:
                    self.clear(cookie.domain, cookie.path, cookie.name)
                except KeyError:
                    pass
        else:
            super().set_cookie(cookie)

    def get_policy(self) -> Any:
        return self._policy

    def copy(self) -> "RequestsCookieJar":
        new = RequestsCookieJar(self._policy)
        new.update(self)
        return new

    # --- by URL (a convenience over the adapters) ---
    def extract(self, set_cookie_values: list[str], url: str) -> None:
        """Store the cookies of ``Set-Cookie`` values received from ``url``."""
        if set_cookie_values:
            self.extract_cookies(CookieResponse(set_cookie_values), CookieRequest(url))  # type: ignore[arg-type]

    def header_for(self, url: str) -> str | None:
        """The Cookie header this jar sends to ``url``, or None."""
        adapter = CookieRequest(url)
        self.add_cookie_header(adapter)  # type: ignore[arg-type]
        return adapter.new_headers.get("cookie")
