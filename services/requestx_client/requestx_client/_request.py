"""``Request`` and ``PreparedRequest``, as in ``requests.models``: a Request holds what the caller gave,
``prepare()`` turns it into the method, URL, headers and body that an adapter sends."""

from __future__ import annotations

import re
from collections.abc import Mapping
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from . import exceptions as exc
from ._body import _dumps, add_params, encode_multipart, encode_params, is_stream, super_len
from .cookies import RequestsCookieJar, cookiejar_from_dict, get_cookie_header
from .structures import CaseInsensitiveDict

_NO_BODY_METHODS = ("GET", "HEAD")
_FORM = "application/x-www-form-urlencoded"

# An http(s) URL that prepare_url would give back unchanged: an ASCII host name (not starting with "*"
# or ".") or an IPv6 literal, no credentials, a numeric port if any, a path, and only characters that
# requoting keeps (no "%", whose escapes of unreserved characters are decoded). The common case: one
# match and nothing else to do.
PLAIN_URL = re.compile(r"https?://(?:[0-9A-Za-z_][0-9A-Za-z._~-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
                        r"/[!#$&'()*+,\-./0-9:;=?@A-Z\[\]_a-z~]*")
# what may stand in a URL as it is; anything else is percent-encoded (requests' requote_uri)
_URL_SAFE = "!#$%&'()*+,/:;=?@[]~"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")

# requests' header checks for bytes: a name without leading whitespace, ":" or line breaks; a value
# without leading whitespace or line breaks (what else the wire forbids, the core refuses when sending)
_HEADER_NAME_B = re.compile(rb"[^:\s][^:\r\n]*\Z")
_HEADER_VALUE_B = re.compile(rb"\S[^\r\n]*\Z|\Z")


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
    (None; bytes for JSON and multipart; a str for form data or a str given; or the stream given, a file
    or an iterable, read when sent) and ``hooks``. Build it with ``Request.prepare()``,
    ``Session.prepare_request()`` or ``PreparedRequest().prepare(...)``; send it with ``Session.send()``."""

    def __init__(self) -> None:
        self.method: str | None = None
        self.url: str | None = None
        self.headers: CaseInsensitiveDict | None = None
        self.body: Any = None
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
        """The URL with ``params`` added to its query, as requests prepares it: a non-ASCII host in IDNA
        (2008), the path "/" when there is none, unsafe characters percent-encoded. Without a scheme it
        is a ``MissingSchema``; without a host, with a host starting with "*" or ".", or one IDNA refuses,
        an ``InvalidURL``. A scheme that does not start with "http" is left as it is (no params)."""
        if url.__class__ is not str:
            if isinstance(url, bytes):
                url = url.decode("utf-8")
            elif url is None:
                raise exc.URLRequired("a URL is required")
            else:
                url = str(url)
        if PLAIN_URL.fullmatch(url) is None:
            url = url.lstrip()
            if ":" in url and url[:4].lower() != "http":
                self.url = url  # another scheme: left as it is, for an adapter mounted for it
                return
            url = _prepared_url(url)
        if params:
            url = add_params(url, params)
            if isinstance(params, (str, bytes)):  # given as it is: requoted (encoded pairs need not be)
                url = _requote(url)
        self.url = url

    def prepare_headers(self, headers: Any) -> None:
        """A copy of ``headers`` with str names, checked as requests checks them (``InvalidHeader``); a
        header whose value is None is left out (that is how a request or a session removes one)."""
        if not headers:
            self.headers = CaseInsensitiveDict()
        elif type(headers) is CaseInsensitiveDict and headers._checked:
            self.headers = headers.copy()  # a session's headers, checked by an earlier request
        else:
            self.headers = _checked_headers(headers)

    def prepare_body(self, data: Any, files: Any, json: Any = None) -> None:
        """``body`` as requests makes it: form data url-encoded (a str), a str or bytes as it is, JSON or
        multipart as bytes, with its Content-Type (unless one was given) and Content-Length. A stream (a
        file, generator or other iterable) stays the body, read when sent: Content-Length if its size is
        known, else Transfer-Encoding: chunked."""
        if not data and json is None and not files:
            self.body = None
            if self.method not in _NO_BODY_METHODS and "content-length" not in self.headers:  # type: ignore[operator]
                self.headers["Content-Length"] = "0"  # type: ignore[index]
            return
        headers = self.headers
        if data and is_stream(data):
            if files:
                raise NotImplementedError("Streamed bodies and files are mutually exclusive.")
            try:
                length = super_len(data)
            except (TypeError, AttributeError, OSError):
                length = None
            if getattr(data, "tell", None) is not None:
                # where it starts, to read it again for a redirect (rewind_body)
                try:
                    self._body_position = data.tell()
                except OSError:
                    self._body_position = object()  # not None: rewinding fails, as it must
            if length:
                headers["Content-Length"] = str(length)  # type: ignore[index]
            else:
                headers["Transfer-Encoding"] = "chunked"  # type: ignore[index]
            self.body = data
            return
        ctype = None
        if files:
            body, ctype = encode_multipart(data, files)
        elif data:
            body = encode_params(data)
            if not (isinstance(data, (str, bytes)) or hasattr(data, "read")):
                ctype = _FORM
        else:
            body, ctype = _dumps(json), "application/json"
        self.body = body
        self.prepare_content_length(body)
        if ctype is not None and "content-type" not in headers:  # type: ignore[operator]
            headers["Content-Type"] = ctype  # type: ignore[index]

    def prepare_content_length(self, body: Any) -> None:
        """Content-Length of ``body`` (none when its size is unknown); "0" without a body, except for GET
        and HEAD."""
        headers = self.headers
        if body is not None:
            length = super_len(body)
            if length:
                headers["Content-Length"] = str(length)  # type: ignore[index]
        elif self.method not in _NO_BODY_METHODS and "content-length" not in headers:  # type: ignore[operator]
            headers["Content-Length"] = "0"  # type: ignore[index]

    def prepare_auth(self, auth: Any, url: str = "") -> None:
        """Apply ``auth`` (a (user, password) pair is Basic; any callable gets this request); without it,
        ``user:password@`` in the URL (which stays in the URL, as in requests: the adapter does not send it)."""
        if auth is None and "@" in self.url:  # type: ignore[operator]
            try:
                parts = urlsplit(self.url)
                user, password = parts.username, parts.password
            except ValueError:
                user = password = None
            if user or password:
                auth = (unquote(user or ""), unquote(password or ""))
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


def _prepared_url(url: str) -> str:
    """``prepare_url`` beyond the plain case, as requests does it."""
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise exc.InvalidURL(*e.args) from None
    if not parts.scheme:
        raise exc.MissingSchema(f"Invalid URL {url!r}: No scheme supplied. Perhaps you meant https://{url}?")
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if hostport.startswith("["):  # an IPv6 literal: its colons are not the port's
        end = hostport.find("]") + 1
        host, port = hostport[:end], hostport[end:]
        if port and not port.startswith(":"):
            raise exc.InvalidURL(f"Failed to parse: {url}")
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
    if port and not (port.isdigit() and port.isascii() and int(port) <= 65535):
        raise exc.InvalidURL(f"Failed to parse: {url}")
    if not host:
        raise exc.InvalidURL(f"Invalid URL {url!r}: No host supplied")
    if not host.isascii():
        host = _idna_host(host)
    elif host.startswith(("*", ".")):
        raise exc.InvalidURL("URL has an invalid label.")
    netloc = userinfo + at + host + (":" + port if port else "")
    return requote_uri(urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, parts.fragment)))


def _idna_host(host: str) -> str:
    """A non-ASCII host name in IDNA 2008 (with UTS 46 mapping, as requests encodes it); InvalidURL if
    a label cannot be encoded."""
    import idna  # only for non-ASCII hosts

    try:
        return idna.encode(host, uts46=True).decode("ascii")  # type: ignore[no-any-return]
    except (idna.IDNAError, UnicodeError):
        raise exc.InvalidURL("URL has an invalid label.") from None


def _unquote_unreserved(uri: str) -> str:
    """``uri`` with the percent-escapes of unreserved characters (letters, digits, "-._~") decoded;
    InvalidURL for a "%" followed by two letters or digits that are not hex."""
    parts = uri.split("%")
    for i in range(1, len(parts)):
        h = parts[i][0:2]
        if len(h) == 2 and h.isalnum():
            try:
                c = chr(int(h, 16))
            except ValueError:
                raise exc.InvalidURL(f"Invalid percent-escape sequence: '{h}'") from None
            parts[i] = c + parts[i][2:] if c in _UNRESERVED else "%" + parts[i]
        else:
            parts[i] = "%" + parts[i]
    return "".join(parts)


def requote_uri(uri: str) -> str:
    """``uri`` with every character that may not stand in a URL percent-encoded, escapes already there
    kept (and those of unreserved characters decoded); a "%" that starts no valid escape is encoded."""
    try:
        return quote(_unquote_unreserved(uri), safe=_URL_SAFE)
    except exc.InvalidURL:
        return quote(uri, safe=_URL_SAFE.replace("%", ""))


def _requote(url: str) -> str:
    """``requote_uri`` of what follows the scheme and host of ``url`` (a redirect's target: its host,
    which may not be ASCII, is left to the core's IDNA)."""
    m = _AUTHORITY.match(url)
    if m is None:
        return requote_uri(url)
    return url[:m.end()] + requote_uri(url[m.end():])


def url_to_send(url: str) -> str:
    """``url`` without the ``user:password@`` of its authority. PreparedRequest.url keeps them, as in
    requests, and prepare_auth made them an Authorization header; the URL given to the core must not
    hold them (a proxy is sent the whole URL). The rest of the URL is left exactly as it is."""
    if "@" not in url:
        return url
    m = _AUTHORITY.match(url)
    if m is None:
        return url
    start = url.index("://") + 3
    authority = url[start:m.end()]
    if "@" not in authority:
        return url
    return url[:start] + authority.rpartition("@")[2] + url[m.end():]


class _CheckedHeader(tuple):  # type: ignore[type-arg]
    """A (name, value) entry of a CaseInsensitiveDict that ``_checked_headers`` found valid (entries are
    plain tuples otherwise): the entries a request merges from its session's headers are not checked
    again, only its own."""

    __slots__ = ()


def _check_header(name: Any, value: Any) -> None:
    """InvalidHeader unless ``name`` and ``value`` are str or bytes as requests wants them: a name not
    empty, without leading whitespace, ":" or line breaks; a value without leading whitespace or line
    breaks."""
    if isinstance(name, str):
        ok = bool(name) and not name[0].isspace() and ":" not in name and "\r" not in name and "\n" not in name
    else:
        ok = isinstance(name, bytes) and _HEADER_NAME_B.match(name) is not None
    if not ok:
        raise _header_error(name, value, name, "name")
    if isinstance(value, str):
        ok = not value or (not value[0].isspace() and "\r" not in value and "\n" not in value)
    else:
        ok = isinstance(value, bytes) and _HEADER_VALUE_B.match(value) is not None
    if not ok:
        raise _header_error(name, value, value, "value")


def _header_error(name: Any, value: Any, part: Any, kind: str) -> exc.InvalidHeader:
    if not isinstance(part, (str, bytes)):
        return exc.InvalidHeader(f"Header part ({part!r}) from {(name, value)} must be of type str or bytes, "
                                 f"not {type(part)}")
    return exc.InvalidHeader(f"Invalid leading whitespace, reserved character(s), or return character(s) "
                             f"in header {kind}: {part!r}")


def _checked_headers(headers: Any) -> CaseInsensitiveDict:
    """A new CaseInsensitiveDict of ``headers``, each name and value checked (``_check_header``), names
    as str, None values left out. The entries of a CaseInsensitiveDict given are marked checked, and the
    whole of it when it needed no change: the next request with the same (session) headers copies it."""
    if type(headers) is CaseInsensitiveDict:
        store = headers._store
        clean = True  # no None value, no bytes name: the dict is sent as it is
        for key, pair in store.items():
            if pair.__class__ is not _CheckedHeader:
                name, value = pair
                if value is None or not isinstance(name, str):
                    clean = False
                    continue
                _check_header(name, value)
                store[key] = _CheckedHeader(pair)  # same content: only the mark is new
        if clean:
            headers._checked = True
            return headers.copy()
        pairs: Any = store.values()
    else:
        pairs = headers.items()
    out = CaseInsensitiveDict()
    for name, value in pairs:
        if value is None:
            continue
        _check_header(name, value)
        if isinstance(name, bytes):
            name = name.decode("ascii")
        out._store[name.lower()] = _CheckedHeader((name, value))
    return out


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
