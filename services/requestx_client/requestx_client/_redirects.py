"""Redirects as requests follows them. ``RedirectRules`` builds the request a redirect leads to (target,
method, body, headers, credentials, cookies), shared by ``Session`` and ``AsyncClient``;
``SessionRedirectMixin`` adds requests' ``resolve_redirects``, which sends each hop through
``self.send(..., allow_redirects=False)`` — so a subclass's ``send``, ``rebuild_auth``,
``rebuild_proxies`` or ``get_redirect_target`` takes part in every hop, as with requests."""

from __future__ import annotations

from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from . import exceptions as exc
from ._proxies import resolve_proxies
from ._request import PreparedRequest, _requote
from .auth import _basic_auth_str
from .cookies import RequestsCookieJar, cookiejar_from_dict, extract_cookies_to_jar, get_cookie_header, merge_cookies
from .models import Response
from .structures import CaseInsensitiveDict
from .utils import get_auth_from_url, get_netrc_auth, rewind_body

__all__ = ["RedirectRules", "SessionRedirectMixin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str | None, int | None]:
    """(scheme, host, port) with the scheme's default port filled in; ValueError for a bad port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(scheme)


def _jar_copy(jar: CookieJar) -> CookieJar:
    """A copy of ``jar`` of the same class (a plain ``http.cookiejar.CookieJar`` has no ``copy``)."""
    if hasattr(jar, "copy"):
        return jar.copy()
    new = jar.__class__()
    for cookie in jar:
        new.set_cookie(cookie)
    return new


def drain(resp: Response) -> None:
    """Read a redirect response's body so its connection goes back to the pool (a broken body, or one
    already taken by ``iter_content()``, closes it instead)."""
    try:
        if resp._native is not None:
            resp._native.body_len()
        else:
            resp.content  # noqa: B018  (a Response built by hand reads its raw)
    except (exc.RequestException, RuntimeError):
        resp.close()


class RedirectRules:
    """The request a redirect response leads to. Uses ``self.cookies``, ``self.trust_env`` and, when the
    class sets it, ``_keep_cookies`` (whether the client's jar takes the cookies each hop sets)."""

    _keep_cookies = True
    trust_env = True

    def _client_jar(self) -> CookieJar:
        cookies = self.cookies
        return cookies if isinstance(cookies, CookieJar) else cookiejar_from_dict(cookies or {})

    def _request_jar(self, cookies: Any) -> CookieJar:
        """The client's jar, or a copy with ``cookies`` added (both are sent, as in requests; the request's
        own win). A plain ``http.cookiejar.CookieJar`` keeps its class, as requests keeps it."""
        if not cookies:
            return self._client_jar()
        if isinstance(cookies, CookieJar) and not isinstance(cookies, RequestsCookieJar):
            jar = _jar_copy(cookies)
            merge_cookies(jar, self._client_jar())
            return merge_cookies(jar, cookies)
        own = cookies if isinstance(cookies, CookieJar) else cookiejar_from_dict(cookies)
        return merge_cookies(_jar_copy(self._client_jar()), own)

    def redirect_cookies(self, cookies: Any) -> CookieJar:
        """The jar a redirect chain carries to ``redirect_request``: the request's own cookies (in a copy of
        its jar's class), plus, for a client that keeps no cookies, those each hop sets (they still reach
        the next hops, as in requests)."""
        if isinstance(cookies, CookieJar):
            return _jar_copy(cookies)
        jar = RequestsCookieJar()
        merge_cookies(jar, cookies)
        return jar

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        """Whether a redirect from ``old_url`` to ``new_url`` must drop Authorization, as requests decides:
        kept for the same scheme, host and port (a default port counts as no port) and for http:80 ->
        https:443 of the same host; dropped for any other change of host, scheme or port."""
        try:
            old, new = _origin(old_url), _origin(new_url)
        except ValueError:  # a port that is not one: nothing to compare, so do not forward credentials
            return True
        if old[1] != new[1]:
            return True
        return old != new and (old[0], old[2], new[0], new[2]) != ("http", 80, "https", 443)

    def get_redirect_target(self, resp: Response) -> str | None:
        """The Location of a redirect response, or None if ``resp`` is not a redirect. A Location sent as
        raw UTF-8 (read as Latin-1 off the wire) is decoded as UTF-8, as requests does."""
        if not resp.is_redirect:
            return None
        location = resp.headers["location"]
        if not location.isascii():
            try:
                location = location.encode("latin-1").decode("utf-8")
            except UnicodeError:
                pass
        return location

    def rebuild_method(self, prep: PreparedRequest, resp: Response) -> None:
        """303 (and 302, except for HEAD) turn the method into GET, and 301 turns POST into GET, as browsers do."""
        code, method = resp.status_code, prep.method
        if (code in (302, 303) and method != "HEAD") or (code == 301 and method == "POST"):
            prep.method = "GET"

    def rebuild_auth(self, prep: PreparedRequest, resp: Response) -> None:
        """Drop Authorization when the redirect leaves the origin (``should_strip_auth``); then, with
        ``trust_env``, the new host's ``.netrc`` credentials apply."""
        headers = prep.headers
        old_url = resp.request.url if resp.request is not None else resp.url
        if "Authorization" in headers and self.should_strip_auth(old_url, prep.url):
            del headers["Authorization"]
            netrc_auth = get_netrc_auth(prep.url) if self.trust_env else None
            if netrc_auth is not None:
                prep.prepare_auth(netrc_auth)

    def redirect_request(self, resp: Response, prep: PreparedRequest, cookies: Any,
                         location: str | None = None) -> PreparedRequest:
        """The request to send for a redirect response (method, body and headers rewritten as requests does).
        ``cookies`` is the chain's jar from ``redirect_cookies``; ``location`` the target, by default from
        ``get_redirect_target``."""
        if location is None:
            location = self.get_redirect_target(resp) or ""
        if location.startswith("//"):
            location = urlsplit(resp.url).scheme + ":" + location
        new_url = urljoin(resp.url, location)
        if not new_url.isascii() or " " in new_url:
            new_url = _requote(new_url)
        old_parts, new_parts = urlsplit(prep.url), urlsplit(new_url)
        if new_parts.fragment == "" and old_parts.fragment:
            new_url = urlunsplit(new_parts._replace(fragment=old_parts.fragment))
        new = PreparedRequest()
        new.method, new.url, new.body, new.hooks = prep.method, new_url, prep.body, prep.hooks
        new._body_position = prep._body_position
        headers = new.headers = prep.headers.copy() if prep.headers is not None else CaseInsensitiveDict()
        self.rebuild_method(new, resp)
        if resp.status_code not in (307, 308):
            for h in ("Content-Length", "Content-Type", "Transfer-Encoding"):
                headers.pop(h, None)
            new.body = None
        elif new._body_position is not None and ("Content-Length" in headers or "Transfer-Encoding" in headers):
            rewind_body(new)  # a stream body was read when sent: read it again from where it started
        headers.pop("Cookie", None)
        if resp.request is None:
            resp.request = prep
        self.rebuild_auth(new, resp)
        if isinstance(cookies, CookieJar) and not self._keep_cookies:
            extract_cookies_to_jar(cookies, prep, resp)
        new._own_cookies = cookies
        new._cookies = self._request_jar(cookies)
        cookie_header = get_cookie_header(new._cookies, new)
        if cookie_header:
            headers["Cookie"] = cookie_header
        return new


class SessionRedirectMixin(RedirectRules):
    """requests' ``SessionRedirectMixin``: ``resolve_redirects`` and ``rebuild_proxies`` for a class with
    ``send``, ``max_redirects``, ``cookies`` and ``trust_env``."""

    def rebuild_proxies(self, prepared_request: PreparedRequest, proxies: Any) -> dict[str, str]:
        """The proxies for ``prepared_request`` (``proxies`` plus the environment's, with ``trust_env``), and
        its Proxy-Authorization header set again from the chosen proxy's credentials. Only a plain-http
        request gets one: an https request goes through a tunnel, where the header would reach the origin."""
        new = resolve_proxies(prepared_request.url, proxies, self.trust_env)
        headers = prepared_request.headers
        headers.pop("Proxy-Authorization", None)
        scheme = urlsplit(prepared_request.url).scheme.lower()
        user, password = get_auth_from_url(new[scheme]) if scheme in new else ("", "")
        if not scheme.startswith("https") and user and password:
            headers["Proxy-Authorization"] = _basic_auth_str(user, password)
        return new

    def resolve_redirects(self, resp: Response, req: PreparedRequest, stream: bool = False, timeout: Any = None,
                          verify: Any = True, cert: Any = None, proxies: Any = None, yield_requests: bool = False,
                          **adapter_kwargs: Any) -> Iterator[Any]:
        """Follow the redirects from ``resp`` (the answer to ``req``): yield each next response (or, with
        ``yield_requests``, only the next request, unsent). Each response's ``history`` holds the ones
        before it; ``TooManyRedirects`` past ``max_redirects``."""
        chain = self.redirect_cookies(getattr(req, "_own_cookies", None))
        history: list[Response] = []
        location = self.get_redirect_target(resp)
        while location:
            history.append(resp)
            if len(history) > self.max_redirects:
                raise exc.TooManyRedirects(f"Exceeded {self.max_redirects} redirects.", response=resp)
            drain(resp)
            req = self.redirect_request(resp, req, chain, location)
            if yield_requests:
                yield req
                return
            hop_proxies = self.rebuild_proxies(req, proxies)
            resp = self.send(req, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=hop_proxies,
                             allow_redirects=False, **adapter_kwargs)
            resp.history = history + resp.history
            location = self.get_redirect_target(resp)
            yield resp
