"""Responses.  Header bytes are prepared once (in ``__init__``, or as module constants for the
content types); ``Response.json`` keeps the bytes orjson produced - no decode/encode round-trip.

Two families, and how the app sends them:

* ``Response`` (and subclasses): a whole body.  Sent in one piece (``proto.response_bytes`` on RSGI,
  ``http.response.start`` + ``http.response.body`` on ASGI).  The framework and apps keep *shared*
  ``Response`` objects (module constants, ``App._not_found``), so a ``Response`` you did not create
  must never be changed in place.
* ``PerRequestResponse`` subclasses (``StreamingResponse``, ``files.FileResponse``,
  ``sse.EventSourceResponse``): made for one request and sent by themselves - ``await resp(scope,
  receive, send)`` on ASGI, ``await resp.send_rsgi(proto)`` on RSGI.  They may be changed in place.

Every response has ``status``, ``header(name)``, ``add_header(name, value)``, ``set_cookie`` /
``delete_cookie`` and ``with_headers(pairs, replace=False)`` (``replace``: True, or the names to replace).  **Middleware must use**
``resp = resp.with_headers(pairs)``: it returns a copy of a ``Response`` (cheap: the body is shared)
and changes a per-request response in place.  ``add_header`` / ``set_cookie`` change the object itself:
use them on responses your own code has just created.
"""
from __future__ import annotations

import re
import string
from contextlib import aclosing
import time
from datetime import datetime, timezone
from email.utils import format_datetime, formatdate
from typing import Any, AsyncIterable, Iterable
from urllib.parse import quote
from types import AsyncGeneratorType

import msgspec
import orjson

from .sync_iteration import aiterate, close_source

__all__ = ["Response", "JSONResponse", "HTMLResponse", "RedirectResponse", "PerRequestResponse",
           "StreamingResponse", "problem", "json_bytes", "cookie_header", "wait_for_disconnect"]

CT_TEXT = b"text/plain; charset=utf-8"
CT_JSON = b"application/json"
CT_HTML = b"text/html; charset=utf-8"
CT_PROBLEM = b"application/problem+json"

# A media type as given (str or bytes) -> the bytes sent, with "; charset=utf-8" added to a text/*
# type that names no charset (as Starlette does; bodies from str are UTF-8).  Worked out once per
# distinct type: the module's own types are seeded, so Response.json & co. pay one dict lookup.
_MEDIA_TYPES: dict = {ct: ct for ct in (CT_TEXT, CT_JSON, CT_HTML, CT_PROBLEM)}
_MAX_MEDIA_TYPES = 256  # apps use a handful; types built per request must not grow the cache forever
_CHARSET = re.compile(rb";\s*charset\s*=", re.IGNORECASE)


def _media_type_bytes(media_type: bytes | str) -> bytes:
    try:
        return _MEDIA_TYPES[media_type]
    except KeyError:
        pass
    mt = media_type.encode("latin-1") if isinstance(media_type, str) else media_type
    if mt[:5].lower() == b"text/" and not _CHARSET.search(mt):
        mt += b"; charset=utf-8"
    if len(_MEDIA_TYPES) < _MAX_MEDIA_TYPES:
        _MEDIA_TYPES[media_type] = mt
    return mt


def _default(obj: Any):
    if isinstance(obj, msgspec.Struct):
        return msgspec.structs.asdict(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    try:  # what orjson leaves to us and msgspec knows: Decimal (a string, exact), timedelta, ...
        return msgspec.to_builtins(obj)
    except TypeError:
        raise TypeError(f"{type(obj).__name__} is not JSON serializable") from None


def json_bytes(obj: Any) -> bytes:
    """Serialize ``obj`` to JSON bytes (orjson; msgspec for Structs).  What orjson refuses and
    ``json.dumps`` (Starlette, FastAPI) sends - dict keys that are not str (``{1: "a"}`` -> ``{"1":"a"}``,
    enums, UUIDs), integers beyond 64 bits - goes through msgspec, which encodes them all."""
    if isinstance(obj, msgspec.Struct):
        return msgspec.json.encode(obj)
    try:
        return orjson.dumps(obj, default=_default)
    except TypeError:  # the rare case: costs nothing on the usual path
        return msgspec.json.encode(obj, enc_hook=_default)


def _header_pair(k, v) -> tuple:
    kb = k if isinstance(k, bytes) else k.encode("latin-1")
    vb = v if isinstance(v, bytes) else str(v).encode("latin-1")
    # 13 and 10 are CR and LF: ``int in bytes`` is a memchr, ``b"\r" in bytes`` five times slower
    if 13 in vb or 10 in vb or 13 in kb or 10 in kb:
        raise ValueError("header names/values must not contain CR or LF")
    return kb.lower(), vb


def _encode_headers(headers) -> list:
    items = headers.items() if isinstance(headers, dict) else headers
    return [_header_pair(k, v) for k, v in items]


def _without(raw, new, replace) -> list:
    """``raw`` without the headers ``with_headers(new, replace)`` replaces."""
    names = {k for k, _ in new} if replace is True else {n.encode("latin-1") for n in replace}
    return [h for h in raw if h[0] not in names]


def _find_header(raw, name: str) -> str | None:
    nb = name.lower().encode("latin-1")
    for k, v in raw:
        if k == nb:
            return v.decode("latin-1")
    return None


# -- Set-Cookie ---------------------------------------------------------------------------------
# Written by hand: ``http.cookies`` accepts ':' in names, has no ``Partitioned`` before Python 3.14
# and would cost a SimpleCookie per call.  A value of RFC 6265 cookie-octets goes out as it is (one
# regex match); any other value goes out in double quotes with the escapes ``http.cookies`` uses
# (``\"``, ``\\``, ``\ooo`` octal for the rest), so Python's parsers (ours, SimpleCookie, Starlette's)
# read back the original.  Browsers store and return the quoted text as it is (JavaScript sees it
# escaped).  CR/LF is refused outright, and characters above U+00FF, which the escapes cannot carry.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 token
_COOKIE_OCTETS = re.compile(r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*\Z")  # RFC 6265 4.1.1 cookie-octet
# inside the quotes, as with ``http.cookies``: these stay, other characters up to U+00FF are escaped
_QUOTE_KEEPS = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~: ()/<=>?@[]{}")
_COOKIE_ESCAPES = {i: "\\%03o" % i for i in range(256) if chr(i) not in _QUOTE_KEEPS}
_COOKIE_ESCAPES[ord('"')] = '\\"'
_COOKIE_ESCAPES[ord("\\")] = "\\\\"
_ATTR_VALUE = re.compile(r"[\x20-\x3a\x3c-\x7e]*\Z")  # any CHAR but controls and ';'
_DOMAIN = re.compile(r"\.?[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\Z")
_SAMESITE = {"lax": "Lax", "strict": "Strict", "none": "None"}
MAX_COOKIE_SIZE = 4096  # name + value: the least every browser stores (RFC 6265 6.1)
_EPOCH = "Thu, 01 Jan 1970 00:00:00 GMT"


def _expires_text(expires) -> str:
    if isinstance(expires, datetime):
        if expires.tzinfo is None:  # naive: taken as UTC
            expires = expires.replace(tzinfo=timezone.utc)
        return format_datetime(expires.astimezone(timezone.utc), usegmt=True)
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        return formatdate(time.time() + expires, usegmt=True)  # seconds from now
    if isinstance(expires, str) and _ATTR_VALUE.match(expires):
        return expires
    raise ValueError(f"cookie expires must be a datetime, seconds from now or an HTTP date, not {expires!r}")


def _cookie_value(value) -> str:
    """``value`` as it goes on the wire: as it is when every character is a cookie-octet, else
    quoted and escaped as ``http.cookies`` does (see above)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    elif not isinstance(value, str):
        raise ValueError(f"cookie value must be a str, int or float, not {type(value).__name__}")
    if _COOKIE_OCTETS.match(value):  # the common case: nothing to quote
        return value
    if "\r" in value or "\n" in value:  # escaping would make it harmless, but it is surely a mistake or an attack
        raise ValueError(f"cookie value {value!r} must not contain CR or LF")
    quoted = value.translate(_COOKIE_ESCAPES)
    if not quoted.isascii():  # only characters above U+00FF are left unescaped
        raise ValueError(f"cookie value {value!r} has characters above U+00FF: encode it first, "
                         "e.g. with urllib.parse.quote")
    return f'"{quoted}"'


def _check_cookie(key: str, value: str, path, domain, secure: bool, samesite, partitioned: bool) -> str | None:
    """Validate a cookie's parts (``value`` as it goes on the wire); returns the SameSite attribute
    text (or None)."""
    if not isinstance(key, str) or not _TOKEN.match(key):
        raise ValueError(f"cookie name {key!r} is not an RFC 6265 token (letters, digits and !#$%&'*+-.^_`|~)")
    if len(key) + len(value) > MAX_COOKIE_SIZE:
        raise ValueError(f"cookie {key!r} is longer than {MAX_COOKIE_SIZE} bytes (browsers drop it)")
    if path is not None and not _ATTR_VALUE.match(path):
        raise ValueError(f"cookie path {path!r} must not contain ';' or control characters")
    if domain is not None and not _DOMAIN.match(domain):
        raise ValueError(f"cookie domain {domain!r} is not a host name")
    site = None
    if samesite is not None:
        site = _SAMESITE.get(str(samesite).lower())
        if site is None:
            raise ValueError(f"cookie samesite must be 'lax', 'strict', 'none' or None, not {samesite!r}")
        if site == "None" and not secure:
            raise ValueError("cookie samesite='none' requires secure=True (browsers reject it otherwise)")
    if partitioned and not secure:
        raise ValueError("a partitioned cookie requires secure=True")
    low = key.lower()  # the prefixes' rules (RFC 6265bis 4.1.3), which browsers enforce
    if low.startswith(("__secure-", "__host-")) and not secure:
        raise ValueError(f"cookie {key!r}: the __Secure-/__Host- prefix requires secure=True")
    if low.startswith("__host-") and (path != "/" or domain is not None):
        raise ValueError(f"cookie {key!r}: the __Host- prefix requires path='/' and no domain")
    return site


def cookie_header(key: str, value: str | int | float = "", max_age: int | None = None, expires=None,
                  path: str | None = "/", domain: str | None = None, secure: bool = False, httponly: bool = False,
                  samesite="lax", partitioned: bool = False) -> str:
    """The value of one ``Set-Cookie`` header; ValueError for anything a browser would misread.
    ``value``: a str, int or float (sent as ``str(value)``), quoted when it needs to be."""
    value = _cookie_value(value)
    site = _check_cookie(key, value, path, domain, secure, samesite, partitioned)
    parts = [f"{key}={value}"]
    if max_age is not None:
        if isinstance(max_age, bool) or not isinstance(max_age, int):
            raise ValueError(f"cookie max_age must be an int (seconds), not {max_age!r}")
        parts.append(f"Max-Age={max_age}")
    if expires is not None:
        parts.append(f"Expires={_expires_text(expires)}")
    if path is not None:
        parts.append(f"Path={path}")
    if domain is not None:
        parts.append(f"Domain={domain}")
    if secure:
        parts.append("Secure")
    if httponly:
        parts.append("HttpOnly")
    if site is not None:
        parts.append(f"SameSite={site}")
    if partitioned:
        parts.append("Partitioned")
    return "; ".join(parts)


class _HeaderOps:
    """``set_cookie`` / ``delete_cookie`` for every response type, through its ``add_header``."""

    __slots__ = ()
    wants_request = False  # True on a FileResponse made without the request: the app calls its negotiate()

    @property
    def status_code(self) -> int:
        """``status`` under Starlette's name."""
        return self.status

    @status_code.setter
    def status_code(self, value: int) -> None:
        self.status = value
        if getattr(self, "_raw", None) is not None:  # a Response's built headers depend on its status
            self._raw = None

    def set_cookie(self, key: str, value: str | int | float = "", max_age: int | None = None, expires=None,
                   path: str | None = "/", domain: str | None = None, secure: bool = False, httponly: bool = False,
                   samesite="lax", partitioned: bool = False):
        """Add a ``Set-Cookie`` header (changes this response: see the module docstring)."""
        self.add_header("set-cookie", cookie_header(key, value, max_age, expires, path, domain, secure, httponly,
                                                    samesite, partitioned))
        return self

    def delete_cookie(self, key: str, path: str | None = "/", domain: str | None = None, secure: bool = False,
                      httponly: bool = False, samesite="lax", partitioned: bool = False):
        """Tell the browser to drop a cookie (same name, path and domain as when it was set)."""
        return self.set_cookie(key, "", 0, _EPOCH, path, domain, secure, httponly, samesite, partitioned)


# -- whole responses --------------------------------------------------------------------------------
_REDIRECTS = frozenset((301, 302, 303, 307, 308))
# Left as they are in a Location: RFC 3986's reserved and unreserved characters and '%' (already
# encoded text is not encoded twice).  Spaces, controls (so no CR/LF: no header splitting), '"', '<',
# '>', '\\', '^', '`', '{', '|', '}' and non-ASCII are percent-encoded (UTF-8).
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~"
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


_NOTHING: Any = object()  # an argument not given


def _starlette_names(value, status: int, content, status_code, empty):
    """``(value, status)`` from the positional names or Starlette's ``content=`` / ``status_code=``."""
    if content is not _NOTHING:
        if value is not _NOTHING:
            raise TypeError("give the content once: positionally or as content=")
        value = content
    if value is _NOTHING:
        if empty is None:
            raise TypeError("Response.json() needs the object to send (or content=)")
        value = empty
    return value, (status if status_code is None else status_code)


def _class_media_type(cls) -> bytes:
    """The ``media_type`` a ``Response`` subclass declares as a class attribute, else text/plain."""
    declared = getattr(cls, "media_type", None)
    return _media_type_bytes(declared) if isinstance(declared, (str, bytes)) else CT_TEXT


class Response(_HeaderOps):
    """A complete response.  ``raw_headers`` (the ASGI byte pairs, with Content-Length except on 1xx,
    204 and 304) are built on first use: the RSGI front end never needs them for a plain response
    (``rsgi.response_headers`` takes a shared list per content type and granian sets Content-Length)."""

    __slots__ = ("body", "status", "media_type", "extra", "_raw")

    def __init__(self, body: bytes | str = b"", status: int = 200, headers=None, media_type: bytes | str | None = None):
        if isinstance(body, str):
            body = body.encode()
        self.body = body
        self.status = status
        if media_type is None:
            # a subclass may name its type as Starlette's do (``class XML(Response): media_type = "application/xml"``);
            # on Response itself the name is the slot, not a str
            media_type = CT_TEXT if self.__class__ is Response else _class_media_type(self.__class__)
        else:  # inline lookup: the per-request path of Response.json
            try:
                media_type = _MEDIA_TYPES[media_type]
            except KeyError:
                media_type = _media_type_bytes(media_type)
        self.media_type = media_type
        self.extra = _encode_headers(headers) if headers else None  # headers beyond the content type
        self._raw = None

    @property
    def raw_headers(self) -> list:
        raw = self._raw
        if raw is None:
            status = self.status
            if status >= 200 and status != 204 and status != 304:
                raw = [(b"content-type", self.media_type), (b"content-length", b"%d" % len(self.body))]
            else:  # RFC 9110 8.6: never on 1xx and 204; on a 304 it would state the 200's length
                raw = [(b"content-type", self.media_type)]
            if self.extra:
                raw.extend(self.extra)
            self._raw = raw
        return raw

    # ``content=`` and ``status_code=`` are Starlette's names, for keywords (``JSONResponse(content=..., status_code=404)``);
    # not keyword-only: that would cost every call about 70 ns
    @classmethod
    def json(cls, obj: Any = _NOTHING, status: int = 200, headers=None, content: Any = _NOTHING,
             status_code: int | None = None) -> "Response":
        if obj is _NOTHING or status_code is not None:  # Starlette's names (keywords): off the usual path
            obj, status = _starlette_names(obj, status, content, status_code, None)
        return cls(json_bytes(obj), status, headers, CT_JSON)

    @classmethod
    def text(cls, text: str = _NOTHING, status: int = 200, headers=None, content: str = _NOTHING,
             status_code: int | None = None) -> "Response":
        if text is _NOTHING or status_code is not None:  # Starlette's names (keywords): off the usual path
            text, status = _starlette_names(text, status, content, status_code, "")
        return cls(text.encode(), status, headers, CT_TEXT)

    @classmethod
    def html(cls, html: str = _NOTHING, status: int = 200, headers=None, content: str = _NOTHING,
             status_code: int | None = None) -> "Response":
        if html is _NOTHING or status_code is not None:  # Starlette's names (keywords): off the usual path
            html, status = _starlette_names(html, status, content, status_code, "")
        return cls(html.encode(), status, headers, CT_HTML)

    @classmethod
    def redirect(cls, url: str, status: int = 307, headers=None, status_code: int | None = None) -> "Response":
        """A redirect to ``url`` (301, 302, 303, 307 or 308), the URL percent-encoded where needed."""
        if status_code is not None:
            status = status_code
        if status not in _REDIRECTS:
            raise ValueError(f"a redirect status is one of 301, 302, 303, 307, 308, not {status!r}")
        if not isinstance(url, str) or not url:
            raise ValueError(f"a redirect needs a non-empty str URL, not {url!r}")
        location = quote(_STRAY_PERCENT.sub("%25", url), safe=_URL_SAFE)
        resp = cls(b"", status, headers)
        resp.add_header("location", location)
        return resp

    def header(self, name: str) -> str | None:
        return _find_header(self.raw_headers, name)

    def add_header(self, name: str, value: str) -> None:
        """Append a header to *this* response (middleware: use ``with_headers``, which copies)."""
        pair = _header_pair(name, value)
        if self.extra is None:
            self.extra = [pair]
        else:
            self.extra.append(pair)
        self._raw = None

    def with_headers(self, pairs, replace=False) -> "Response":
        """A copy with ``pairs`` added.  ``replace``: True drops the headers of every name in ``pairs``
        first, a collection of lower-case names drops those only.  The body is shared, so this costs a
        few small lists; the original, possibly shared, stays untouched."""
        cls = self.__class__
        out = cls.__new__(cls)
        state = getattr(self, "__dict__", None)  # a subclass's own attributes
        if state:
            out.__dict__.update(state)
        out.body, out.status, out.media_type, out._raw = self.body, self.status, self.media_type, None
        new = _encode_headers(pairs)
        old = self.extra or ()
        if replace and old:
            old = _without(old, new, replace)
        out.extra = [*old, *new]
        return out

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body})


# One implementation each: the package exports these names, they are ``Response``'s constructors.
JSONResponse = Response.json
HTMLResponse = Response.html
RedirectResponse = Response.redirect


# -- responses that send themselves -----------------------------------------------------------------
async def wait_for_disconnect(receive) -> None:
    """Return once the ASGI server reports ``http.disconnect`` (request body messages are skipped:
    only for responses whose handler no longer reads the body)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class PerRequestResponse(_HeaderOps):
    """Base of the responses made for one request that send themselves: ``await resp(scope, receive,
    send)`` (ASGI) and ``await resp.send_rsgi(proto)`` (RSGI).  ``raw_headers`` is a plain list of
    byte pairs that may be changed in place."""

    __slots__ = ("status", "raw_headers")

    def header(self, name: str) -> str | None:
        return _find_header(self.raw_headers, name)

    def add_header(self, name: str, value: str) -> None:
        self.raw_headers.append(_header_pair(name, value))

    def with_headers(self, pairs, replace: bool = False) -> "PerRequestResponse":
        """Same contract as ``Response.with_headers``; this object is per request, so it is changed in
        place and returned."""
        new = _encode_headers(pairs)
        if replace:
            self.raw_headers = _without(self.raw_headers, new, replace)
        self.raw_headers.extend(new)
        return self

    def rsgi_headers(self) -> list:
        """The headers as RSGI's str pairs."""
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.raw_headers]

    async def __call__(self, scope, receive, send) -> None:
        raise NotImplementedError

    async def send_rsgi(self, proto) -> None:
        raise NotImplementedError


def _exhausted(it) -> bool:
    """An async generator that ran to its end: nothing is left to close (``aclose`` would cost about a
    microsecond per response for nothing).  Any other iterable is closed as it says."""
    return it.__class__ is AsyncGeneratorType and it.ag_frame is None


class StreamingResponse(PerRequestResponse):
    """Streams the chunks of an async (or plain) iterable with chunked transfer encoding."""

    __slots__ = ("iterable",)

    def __init__(self, iterable: AsyncIterable | Iterable, status: int = 200, headers=None,
                 media_type: bytes | str | None = None):
        self.iterable = iterable
        self.status = status
        raw = [(b"content-type", _media_type_bytes(media_type) if media_type else CT_TEXT)]
        if headers:
            raw.extend(_encode_headers(headers))
        self.raw_headers = raw

    async def chunks(self):
        """The body chunks as bytes (``str`` chunks encoded); the iterable is closed at the end, also
        when the consumer stops early (client gone).  A sync iterable's ``next`` runs in the thread pool."""
        async with aclosing(aiterate(self.iterable)) as items:
            async for chunk in items:
                yield chunk.encode() if isinstance(chunk, str) else chunk

    async def _pump(self, write) -> None:
        """``await write(chunk)`` for every chunk, then close the iterable, also when ``write`` raises
        because the client left.  An async iterable is read straight (no generator in between: this is
        the per-chunk path of every stream); a sync one through ``aiterate`` (``next`` in the thread pool)."""
        it = self.iterable
        if hasattr(it, "__aiter__"):
            try:
                async for chunk in it:
                    await write(chunk.encode() if isinstance(chunk, str) else chunk)
            finally:
                if not _exhausted(it):
                    await close_source(it)
            return
        async with aclosing(aiterate(it)) as items:
            async for chunk in items:
                await write(chunk.encode() if isinstance(chunk, str) else chunk)

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.raw_headers})
        it = self.iterable
        if hasattr(it, "__aiter__"):  # the per-chunk path of every stream: send awaited straight
            try:
                async for chunk in it:
                    await send({"type": "http.response.body", "body": chunk if chunk.__class__ is bytes
                                else (chunk.encode() if isinstance(chunk, str) else chunk), "more_body": True})
            finally:
                if not _exhausted(it):
                    await close_source(it)
        else:
            await self._pump(lambda chunk: send({"type": "http.response.body", "body": chunk, "more_body": True}))
        await send({"type": "http.response.body", "body": b""})

    async def send_rsgi(self, proto) -> None:
        """Through RSGI's stream transport (chunked encoding); a client that left makes the transport
        raise (granian's ``RSGIProtocolClosed``), which ends the iteration and closes the iterable."""
        transport = proto.response_stream(self.status, self.rsgi_headers())
        await self._pump(transport.send_bytes)


def problem(status: int, title: str, detail: str | None = None, *, errors: list | None = None,
            headers=None) -> Response:
    """An RFC 9457 ``application/problem+json`` response."""
    body: dict = {"type": "about:blank", "title": title, "status": status}
    if detail:
        body["detail"] = detail
    if errors:
        body["errors"] = errors
    return Response(orjson.dumps(body), status, headers, CT_PROBLEM)
