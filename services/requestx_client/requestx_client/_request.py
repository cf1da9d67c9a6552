"""``Request`` and ``PreparedRequest``, as in ``requests.models``: a Request holds what the caller gave,
``prepare()`` turns it into the exact method, URL, headers and body bytes that an adapter sends."""

from __future__ import annotations

import re
from collections.abc import Mapping
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from . import exceptions as exc
from ._body import add_params, encode_body
from .cookies import RequestsCookieJar, cookiejar_from_dict, get_cookie_header
from .structures import CaseInsensitiveDict

_NO_BODY_METHODS = ("GET", "HEAD")
# what may stand in a URL as it is; anything else in the path, query or fragment is percent-encoded
_URL_SAFE = "!#$%&'()*+,/:;=?@[]~"
_NO_PATH = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*(?=[?#]|$)")  # an http(s) URL without a path
_NEEDS_QUOTING = re.compile(r"[^!#$%&'()*+,\-./0-9:;=?@A-Z\[\]_a-z~]")


class RequestHooksMixin:
    hooks: dict[str, list[Any]]

    def register_hook(self, event: str, hook: Any) -> None:
        """Add a hook (a callable, or an iterable of them) for ``event`` ("response")."""
        if event not in self.hooks:
            raise ValueError(f'Unsupported event specified, with event name "{event}"')
        if callable(hook):
            self.hooks[event].append(hook)
        elif hasattr(hook, "__iter__"):
            self.hooks[event].extend(h for h in hook if callable(h))

    def deregister_hook(self, event: str, hook: Any) -> bool:
        """Remove ``hook`` from ``event``; False if it was not there."""
        try:
            self.hooks[event].remove(hook)
            return True
        except ValueError:
            return False


class Request(RequestHooksMixin):
    """A request as the caller describes it. ``prepare()`` (or ``Session.prepare_request``, which adds the
    session's settings) gives the ``PreparedRequest`` to send."""

    def __init__(self, method: str | None = None, url: Any = None, headers: Any = None, files: Any = None,
                 data: Any = None, params: Any = None, auth: Any = None, cookies: Any = None, hooks: Any = None,
                 json: Any = None) -> None:
        self.hooks = {"response": []}  # default_hooks(), inline: a Request is made for every call
        if hooks:
            for event, hook in hooks.items():
                self.register_hook(event, hook)
        self.method = method
        self.url = url
        self.headers = {} if headers is None else headers
        self.files = [] if files is None else files
        self.data = [] if data is None else data
        self.json = json
        self.params = {} if params is None else params
        self.auth = auth
        self.cookies = cookies

    def __repr__(self) -> str:
        return f"<Request [{self.method}]>"

    def prepare(self) -> "PreparedRequest":
        """This request alone prepared (no session settings)."""
        p = PreparedRequest()
        p.prepare(method=self.method, url=self.url, headers=self.headers, files=self.files, data=self.data,
                  params=self.params, auth=self.auth, cookies=self.cookies, hooks=self.hooks, json=self.json)
        return p


class PreparedRequest(RequestHooksMixin):
    """The request as it is sent: ``method``, ``url``, ``headers`` (a ``CaseInsensitiveDict``), ``body``
    (bytes or None) and ``hooks``. Build it with ``Request.prepare()``, ``Session.prepare_request()`` or
    ``PreparedRequest().prepare(...)``; send it with ``Session.send()``."""

    def __init__(self) -> None:
        self.method: str | None = None
        self.url: str | None = None
        self.headers: CaseInsensitiveDict | None = None
        self.body: bytes | None = None
        self.hooks = {"response": []}  # default_hooks(), inline (one per request)
        self._cookies: CookieJar | None = None  # the jar the Cookie header came from
        self._own_cookies: CookieJar | None = None  # the request's own cookies= (a session adds its jar)
        self._body_position: Any = None

    def __repr__(self) -> str:
        return f"<PreparedRequest [{self.method}]>"

    def prepare(self, method: str | None = None, url: Any = None, headers: Any = None, files: Any = None,
                data: Any = None, params: Any = None, auth: Any = None, cookies: Any = None, hooks: Any = None,
                json: Any = None) -> None:
        self.prepare_method(method)
        self.prepare_url(url, params)
        self.prepare_headers(headers)
        self.prepare_cookies(cookies)
        self.prepare_body(data, files, json)
        self.prepare_auth(auth, url)
        # after auth: an auth object may register hooks of its own (digest answers 401s that way)
        self.prepare_hooks(hooks)

    def copy(self) -> "PreparedRequest":
        p = PreparedRequest()
        p.method = self.method
        p.url = self.url
        p.headers = self.headers.copy() if self.headers is not None else None
        p._cookies = _copy_jar(self._cookies)
        p._own_cookies = self._own_cookies
        p.body = self.body
        p.hooks = self.hooks
        p._body_position = self._body_position
        return p

    def prepare_method(self, method: Any) -> None:
        if method.__class__ is not str and method is not None:
            method = method.decode("ascii") if isinstance(method, bytes) else str(method)
        self.method = None if method is None else method.upper()

    def prepare_url(self, url: Any, params: Any = None) -> None:
        """The URL with ``params`` added to its query. Without a scheme it is a ``MissingSchema``, without
        a host an ``InvalidURL``; any other check (port, IDNA, characters) is made when it is sent."""
        if url.__class__ is not str:
            if isinstance(url, bytes):
                url = url.decode("utf-8")
            elif url is None:
                raise exc.URLRequired("a URL is required")
            else:
                url = str(url)
        url = url.strip()
        if not url.startswith(("http://", "https://")):  # the common case skips the parse
            if ":" in url and not url.lower().startswith("http"):
                self.url = url  # another scheme: left as is for an adapter mounted for it
                return
            try:
                parts = urlsplit(url)
            except ValueError as e:
                raise exc.InvalidURL(*e.args) from None
            if not parts.scheme:
                raise exc.MissingSchema(f"Invalid URL {url!r}: No scheme supplied. Perhaps you meant https://{url}?")
            if not parts.netloc:
                raise exc.InvalidURL(f"Invalid URL {url!r}: No host supplied")
        if params:
            url = add_params(url, params)
        if _NEEDS_QUOTING.search(url):
            url = _requote(url)
        m = _NO_PATH.match(url)
        if m is not None:  # "http://host" or "http://host?q": the path is "/", as requests sends it
            url = url[:m.end()] + "/" + url[m.end():]
        self.url = url

    def prepare_headers(self, headers: Any) -> None:
        """A copy of ``headers``; names and values are checked when the request is sent."""
        if not headers:
            self.headers = CaseInsensitiveDict()
        elif type(headers) is CaseInsensitiveDict:
            self.headers = headers.copy()
        else:
            h = self.headers = CaseInsensitiveDict()
            for name, value in headers.items():
                h[name.decode("ascii") if isinstance(name, bytes) else name] = value

    def prepare_body(self, data: Any, files: Any, json: Any = None) -> None:
        """``body`` as bytes from ``data``/``files``/``json`` (a generator or file is read whole), with
        its Content-Type (unless one was given) and Content-Length."""
        if data or files or json is not None:
            body, ctype = encode_body(data, files, json)
            if ctype is not None and "content-type" not in self.headers:  # type: ignore[operator]
                self.headers["Content-Type"] = ctype  # type: ignore[index]
            self.body = body
        else:
            self.body = None
        self.prepare_content_length(self.body)

    def prepare_content_length(self, body: Any) -> None:
        headers = self.headers
        if body is not None:
            headers["Content-Length"] = str(len(body))  # type: ignore[index]
        elif self.method not in _NO_BODY_METHODS and "content-length" not in headers:  # type: ignore[operator]
            headers["Content-Length"] = "0"  # type: ignore[index]

    def prepare_auth(self, auth: Any, url: str = "") -> None:
        """Apply ``auth`` (a (user, password) pair is Basic; any callable gets this request); without it,
        ``user:password@`` in the URL, which is then taken out of the URL."""
        if auth is None and "@" in self.url:  # type: ignore[operator]
            parts = urlsplit(self.url)
            if parts.username is not None:
                auth = (unquote(parts.username), unquote(parts.password or ""))
                host = parts.netloc.rpartition("@")[2]
                self.url = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
        if auth:
            if isinstance(auth, (tuple, list)) and len(auth) == 2:
                from .auth import HTTPBasicAuth

                auth = HTTPBasicAuth(*auth)
            if not callable(auth):
                raise TypeError("auth must be a (user, password) tuple or a callable like HTTPBasicAuth")
            r = auth(self)
            if r is not None and r is not self:
                self.__dict__.update(r.__dict__)
            self.prepare_content_length(self.body)

    def prepare_cookies(self, cookies: Any) -> None:
        """The Cookie header from ``cookies`` (a CookieJar or a dict). A Cookie header already set is
        left alone, so remove it first to prepare the cookies again."""
        if cookies.__class__ is RequestsCookieJar or isinstance(cookies, CookieJar):
            self._cookies = cookies
        elif cookies:
            self._cookies = cookiejar_from_dict(cookies)
        else:
            self._cookies = None
        if self._own_cookies is None:
            self._own_cookies = self._cookies
        if self._cookies:
            header = get_cookie_header(self._cookies, self)
            if header is not None:
                self.headers["Cookie"] = header  # type: ignore[index]

    def prepare_hooks(self, hooks: Any) -> None:
        if hooks:
            for event, hook in hooks.items():
                if hook:  # an empty list adds nothing
                    self.register_hook(event, hook)

    @property
    def path_url(self) -> str:
        """The path and query of the URL, as in the request line ("/" for an empty path)."""
        parts = urlsplit(self.url)
        path = parts.path or "/"
        return path + "?" + parts.query if parts.query else path


def _requote(url: str) -> str:
    """``url`` with spaces, non-ASCII and other unsafe characters of its path, query and fragment
    percent-encoded (escapes already there are kept; the host is left to the core's IDNA)."""
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise exc.InvalidURL(*e.args) from None
    path, query, fragment = (quote(p, safe=_URL_SAFE) for p in (parts.path, parts.query, parts.fragment))
    return urlunsplit((parts.scheme, parts.netloc, path, query, fragment))


def _copy_jar(jar: CookieJar | None) -> CookieJar | None:
    if jar is None:
        return None
    if hasattr(jar, "copy"):
        return jar.copy()
    new = RequestsCookieJar()
    for c in list(jar):
        new.set_cookie(c)
    return new


def merge_setting(request_setting: Any, session_setting: Any, dict_class: type = dict) -> Any:
    """A request's setting over the session's: two mappings are merged (the request wins, and a None
    value removes the key); otherwise the request's, unless it is None."""
    if session_setting is None:
        return request_setting
    if request_setting is None:
        return session_setting
    if not (isinstance(session_setting, Mapping) and isinstance(request_setting, Mapping)):
        return request_setting
    merged = dict_class(session_setting)
    merged.update(request_setting)
    for key in [k for k, v in merged.items() if v is None]:
        del merged[key]
    return merged


def merge_hooks(request_hooks: Any, session_hooks: Any, dict_class: type = dict) -> Any:
    """The session's hooks unless the request has its own for the event (then the request's)."""
    if session_hooks is None or session_hooks.get("response") == []:
        return request_hooks
    if request_hooks is None or request_hooks.get("response") == []:
        return session_hooks
    return merge_setting(request_hooks, session_hooks, dict_class)
