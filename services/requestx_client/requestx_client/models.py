"""``Response``, with the attributes requests users rely on; ``Request`` and ``PreparedRequest``
(defined in ``_request.py``) are importable from here, as from ``requests.models``."""

from __future__ import annotations

import codecs
import datetime
import json as _json
import re
import sys
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode  # noqa: F401  (requests.models re-exports it)

from . import exceptions as exc
from ._json import loads_like_json
from ._request import PreparedRequest, Request
from .cookies import RequestsCookieJar, extract_cookies_to_jar
from .structures import CaseInsensitiveDict

__all__ = ["PreparedRequest", "Request", "Response", "REDIRECT_STATI", "ITER_CHUNK_SIZE",
           "CONTENT_CHUNK_SIZE"]

REDIRECT_STATI = frozenset((301, 302, 303, 307, 308))
_REASONS = {s.value: s.phrase for s in HTTPStatus}
ITER_CHUNK_SIZE = 512
CONTENT_CHUNK_SIZE = 10 * 1024  # the pieces ``content`` reads a hand-built response's raw in


_UTF8_NAMES: dict[str, bool] = {}


def _is_utf8(encoding: str) -> bool:
    """Whether ``encoding`` names UTF-8 (any spelling Python accepts); cached per name."""
    known = _UTF8_NAMES.get(encoding)
    if known is None:
        try:
            known = codecs.lookup(encoding).name == "utf-8"
        except LookupError:
            known = False
        if len(_UTF8_NAMES) < 64:
            _UTF8_NAMES[encoding] = known
    return known


def _charset_from_content_type(ct: str | None) -> str | None:
    if not ct:
        return None
    mime, *params = ct.split(";")
    for p in params:
        k, _, v = p.strip().partition("=")
        if k.strip().lower() == "charset":
            v = v.strip().strip("'\"")
            if v:
                return v
    mime = mime.strip().lower()
    if mime.startswith("text/"):
        return "ISO-8859-1"
    if mime == "application/json":
        return "utf-8"
    return None


class _Sentinel:
    """A marker value of ``Response``'s state, named in reprs."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# State a response from the core answers from there until it is set (class-level defaults, see Response).
_FROM_CORE: Any = _Sentinel("<from the core>")
# Response._body once iter_content() streams the body out of the core: it is no longer there to read.
_STREAMED: Any = _Sentinel("<streamed out by iter_content()>")

_LINK_SEPARATOR = re.compile(", *<")


def _parse_links(value: str) -> list[dict[str, str]]:
    """The links of a Link header as dicts of "url" and their parameters, as requests parses them
    (links are split where a comma is followed by "<", so a URL may hold commas)."""
    value = value.strip(" '\"")
    links = []
    for val in _LINK_SEPARATOR.split(value) if value else ():
        url, _, params = val.partition(";")
        link = {"url": url.strip("<> '\"")}
        for p in params.split(";"):
            k, sep, v = p.partition("=")
            if sep:
                link[k.strip(" '\"")] = v.strip(" '\"")
        links.append(link)
    return links


def _slices(data: bytes, size: int | None) -> Iterator[bytes]:
    """``data`` in pieces of ``size`` bytes (one piece if None or not positive)."""
    step = size if size is not None and size > 0 else max(len(data), 1)
    return (data[i:i + step] for i in range(0, len(data), step))


def _requests_error(e: Exception) -> Exception | None:
    """The exception requests raises for urllib3's error ``e`` while a body is read from ``raw``; None for
    any other error. urllib3 is looked up in sys.modules, not imported: an error of urllib3's means it is
    loaded, and requestx_client does not need it otherwise."""
    u3 = sys.modules.get("urllib3.exceptions")
    if u3 is None:
        return None
    if isinstance(e, u3.ProtocolError):
        return exc.ChunkedEncodingError(e)
    if isinstance(e, u3.DecodeError):
        return exc.ContentDecodingError(e)
    if isinstance(e, u3.ReadTimeoutError):
        return exc.ConnectionError(e)
    if isinstance(e, u3.SSLError):
        return exc.SSLError(e)
    return None


class _NativeRaw:
    """``Response.raw`` of a response from the core: a file-like view of the part of the body not read
    yet, as urllib3's ``HTTPResponse`` is in requests. Without ``stream=True`` the core has read the whole
    body already, so nothing is left (as in requests, where reading ``content`` drains ``raw``). The core
    undoes Content-Encoding itself: ``decode_content`` is accepted and has no effect."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._closed = False

    @property
    def closed(self) -> bool:
        # nothing more will come from the connection: closed, read to the end, or read whole by the core
        return self._closed or self._native.is_consumed()

    def readable(self) -> bool:
        return True

    def read(self, amt: int | None = None, decode_content: bool = True, cache_content: bool = False) -> bytes:
        """Up to ``amt`` bytes (fewer only at the end), or all the rest if None; b"" once nothing is left."""
        native = self._native
        if self._closed or native.is_consumed():
            return b""
        if amt is None or amt < 0:
            # the core keeps what it reads here: Response.content gives it again rather than failing
            return native.content()
        parts = []
        while amt > 0:
            piece = native.read_chunk(amt)
            if piece is None:
                break
            parts.append(piece)
            amt -= len(piece)
        return b"".join(parts)

    def stream(self, amt: int | None = 2**16, decode_content: bool = True) -> Iterator[bytes]:
        """The rest of the body in pieces of ``amt`` bytes, as urllib3's ``stream()``."""
        while True:
            data = self.read(amt)
            if not data:
                return
            yield data

    def close(self) -> None:
        self._native.close()  # a body not read to the end is dropped with its connection
        self._closed = True


class Response:
    """An HTTP response. ``content``/``text``/``json()`` read the body on first use.

    ``Response(native, ...)`` wraps a response from the core (the adapters build them). ``Response()`` is
    an empty one, as ``requests.Response()`` is, for a caller to fill in: its body is read from ``raw``
    (urllib3-like, with ``stream()``, or any file-like object) or set as ``_content``."""

    __attrs__ = ["_content", "status_code", "headers", "url", "history", "encoding", "reason", "cookies",
                 "elapsed", "request"]

    # Per-response state starts as these class-level defaults and becomes an instance attribute when
    # first set: a response that is only read costs fewer attribute stores (a hot path). What is
    # _FROM_CORE, a response from the core answers from there until it is set; Response() sets it all.
    _native: Any = None  # also once unpickled
    _headers: CaseInsensitiveDict | None = None
    _cookies: RequestsCookieJar | None = None
    _encoding: str | None = None
    _encoding_set = False
    _body: Any = _FROM_CORE  # requests' _content (False: not read, None: no body, or the bytes), or _STREAMED
    _consumed: Any = _FROM_CORE  # requests' _content_consumed
    _reason: Any = _FROM_CORE
    _raw: Any = _FROM_CORE
    connection = None  # the adapter that sent the request
    _next: PreparedRequest | None = None

    def __init__(self, native: Any = None, request: PreparedRequest | None = None,
                 elapsed: datetime.timedelta | float | None = None) -> None:
        self._native = native
        if native is not None:
            self.status_code: int = native.status
            self.url: str = native.url
        else:  # requests' empty Response
            self.status_code = None  # type: ignore[assignment]
            self.url = None  # type: ignore[assignment]
            self._body = False
            self._consumed = False
            self._headers = CaseInsensitiveDict()
            self._cookies = RequestsCookieJar()
            self._encoding_set = True
            self._reason = None
            self._raw = None
        self.history: list[Response] = []
        self.request = request
        self._elapsed = elapsed

    def __getstate__(self) -> dict[str, Any]:
        # a pickle carries the body, not the connection: read it first (as requests does)
        if not self._content_consumed:
            self.content  # noqa: B018
        return {name: getattr(self, name, None) for name in self.__attrs__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._consumed = True  # the body is the one pickled, and there is no raw to read more from
        self._raw = None

    @property
    def elapsed(self) -> datetime.timedelta:
        """Time from sending the request to having the response head (and the body unless streamed)."""
        e = self._elapsed
        if not isinstance(e, datetime.timedelta):
            e = self._elapsed = datetime.timedelta(seconds=e or 0.0)
        return e

    @elapsed.setter
    def elapsed(self, value: datetime.timedelta) -> None:
        self._elapsed = value

    # --- status ---
    @property
    def reason(self) -> Any:
        """The reason phrase: the standard one for the status (the core does not keep the server's)
        unless it was set; a caller may set bytes, as urllib3 gives them."""
        r = self._reason
        if r is _FROM_CORE:
            return _REASONS.get(self.status_code, "")
        return r

    @reason.setter
    def reason(self, value: Any) -> None:
        self._reason = value

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"<Response [{self.status_code}]>"

    def __iter__(self) -> Iterator[bytes]:
        return self.iter_content(128)

    @property
    def is_redirect(self) -> bool:
        return self.status_code in REDIRECT_STATI and self._has_location()

    @property
    def next(self) -> PreparedRequest | None:
        """The request a redirect leads to, when it was not followed (``allow_redirects=False``)."""
        return self._next

    @property
    def is_permanent_redirect(self) -> bool:
        return self.status_code in (301, 308) and self._has_location()

    def _has_location(self) -> bool:
        return self._header("location") is not None

    def _header(self, name: str) -> str | None:
        # from the headers once they are built (a caller may have edited them), else from the core
        if self._headers is not None or self._native is None:
            return self.headers.get(name)
        return self._native.header(name)

    @property
    def http_version(self) -> str | None:
        native = self._native
        return native.http_version if native is not None else None

    def raise_for_status(self) -> None:
        """Raise ``HTTPError`` for a 4xx or 5xx status."""
        code = self.status_code
        if 400 <= code < 600:
            reason = self.reason
            if isinstance(reason, bytes):  # some servers localise it: UTF-8, else taken as latin-1
                try:
                    reason = reason.decode("utf-8")
                except UnicodeDecodeError:
                    reason = reason.decode("iso-8859-1")
            kind = "Client" if code < 500 else "Server"
            raise exc.HTTPError(f"{code} {kind} Error: {reason} for url: {self.url}", response=self)

    # --- headers and cookies ---
    @property
    def headers(self) -> CaseInsensitiveDict:
        h = self._headers
        if h is None:
            h = CaseInsensitiveDict()
            store = h._store
            for k, v in self._native.headers():
                lk = k.lower()
                old = store.get(lk)
                store[lk] = (k, v if old is None else old[1] + ", " + v)
            self._headers = h
        return h

    @headers.setter
    def headers(self, value: Any) -> None:
        self._headers = CaseInsensitiveDict(value)

    @property
    def cookies(self) -> RequestsCookieJar:
        if self._cookies is None:
            jar = RequestsCookieJar()
            if self._native is not None:  # judged against the URL of the request it answers
                req = self.request
                if req is None:
                    req = PreparedRequest()
                    req.url, req.headers = self.url, CaseInsensitiveDict()
                extract_cookies_to_jar(jar, req, self)
            self._cookies = jar
        return self._cookies

    @cookies.setter
    def cookies(self, value: RequestsCookieJar) -> None:
        self._cookies = value

    @property
    def links(self) -> dict[str, dict[str, str]]:
        """The Link header's links by their "rel" (else their URL)."""
        header = self._header("link")
        result: dict[str, dict[str, str]] = {}
        if header:
            for link in _parse_links(header):
                key = link.get("rel") or link.get("url")
                if key:
                    result[key] = link
        return result

    @property
    def raw(self) -> Any:
        """The body as a file-like object, for reading it without ``content`` (with ``stream=True``)."""
        raw = self._raw
        if raw is _FROM_CORE:  # made on first use: few callers want it
            raw = self._raw = _NativeRaw(self._native)
        return raw

    @raw.setter
    def raw(self, value: Any) -> None:
        self._raw = value

    # --- body ---
    # The body of a response from the core stays there (_body is _FROM_CORE) unless iter_content() streams
    # it out (_STREAMED) or a caller sets _content; any other body is requests' _content, read from raw.
    @property
    def content(self) -> bytes | None:
        if self._body is _FROM_CORE:
            return self._native.content()
        return self._read_body()

    def _read_body(self) -> bytes | None:
        """``content`` when the body is not the core's: as requests reads it, from ``raw`` once."""
        body = self._body
        if body is _STREAMED:
            raise exc.StreamConsumedError("the content was already consumed by iter_content()")
        if body is False:
            if self._content_consumed:
                raise RuntimeError("The content for this response was already consumed")
            if self.status_code == 0 or self.raw is None:
                body = None
            else:
                body = b"".join(self.iter_content(CONTENT_CHUNK_SIZE)) or b""
            self._body = body
        self._consumed = True
        return body

    @property
    def _content(self) -> Any:
        """requests' cache of the body: False until it has been read, then the bytes (None: no body)."""
        body = self._body
        if body is _FROM_CORE:
            return self._native.content() if self._content_consumed else False
        return False if body is _STREAMED else body

    @_content.setter
    def _content(self, value: Any) -> None:
        self._body = value

    @property
    def _content_consumed(self) -> bool:
        """requests' flag: whether the body has been read to the end through this response."""
        consumed = self._consumed
        if consumed is not _FROM_CORE:
            return consumed  # type: ignore[no-any-return]
        native = self._native
        if self._body is _STREAMED or not native.is_consumed():
            return False  # being streamed (the stream sets the flag at its end), or not read yet
        try:
            native.content()  # in memory, read by the core or by ``content``: read
        except exc.RequestException:  # dropped by close(), or drained through raw, before it was read
            return False
        return True

    @_content_consumed.setter
    def _content_consumed(self, value: bool) -> None:
        self._consumed = value

    @property
    def encoding(self) -> str | None:
        if not self._encoding_set:
            self._encoding = _charset_from_content_type(self._native.header("content-type"))
            self._encoding_set = True
        return self._encoding

    @encoding.setter
    def encoding(self, value: str | None) -> None:
        self._encoding = value
        self._encoding_set = True

    @property
    def apparent_encoding(self) -> str:
        data = self.content or b""
        for bom, name in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"),
                          (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
                          (codecs.BOM_UTF16_BE, "utf-16")):
            if data.startswith(bom):
                return name
        try:
            data.decode("utf-8")
            return "utf-8"
        except UnicodeDecodeError:
            return "windows-1252"

    @property
    def text(self) -> str:
        """The body decoded with the charset of Content-Type (or a guess); never raises on bad bytes."""
        data = self.content
        if not data:
            return ""
        encoding = self.encoding or self.apparent_encoding
        try:
            return data.decode(encoding, errors="replace")
        except LookupError:  # unknown charset name
            return data.decode(self.apparent_encoding, errors="replace")

    def json(self, **kwargs: Any) -> Any:
        """The body parsed as ``json.loads(self.text, **kwargs)`` would parse it (the native parser does it
        when it gives the same result); raises ``JSONDecodeError`` (a ``ValueError``) if it is not JSON."""
        if not kwargs and self._body is _FROM_CORE:  # the native parser reads the core's body
            enc = self.encoding
            if enc is None or _is_utf8(enc):
                native = self._native
                return loads_like_json(native, native.content(), self._json_text)
        return self._json_text(**kwargs)

    def _json_text(self, **kwargs: Any) -> Any:
        try:
            return _json.loads(self.text, **kwargs)
        except _json.JSONDecodeError as e:
            raise exc.JSONDecodeError(e.msg, e.doc, e.pos) from None

    def iter_content(self, chunk_size: int | None = 1, decode_unicode: bool = False) -> Iterator[Any]:
        """Iterate over the body in pieces of at most ``chunk_size`` bytes (any size if None)."""
        if chunk_size is not None and not isinstance(chunk_size, int):
            raise TypeError(f"chunk_size must be an int, it is instead a {type(chunk_size)}.")
        body = self._body
        gen: Iterator[bytes]
        if body is _FROM_CORE:
            native = self._native
            if native.is_consumed():
                gen = _slices(native.content(), chunk_size)
            else:
                self._body = _STREAMED
                gen = self._stream_from_core(chunk_size)
        elif body is _STREAMED or (isinstance(body, bool) and self._content_consumed):
            raise exc.StreamConsumedError("the content was already consumed by iter_content()")
        elif self._content_consumed:
            gen = _slices(body or b"", chunk_size)
        else:
            gen = self._stream_from_raw(chunk_size)
        if decode_unicode:
            return self._decode_stream(gen)
        return gen

    def _stream_from_core(self, chunk_size: int | None) -> Iterator[bytes]:
        read = self._native.read_chunk
        while True:
            piece = read(chunk_size)
            if piece is None:
                break
            yield piece
        self._consumed = True  # read to the end (not merely closed): requests' _content_consumed

    def _stream_from_raw(self, chunk_size: int | None) -> Iterator[bytes]:
        """The body read from ``raw`` as requests reads it: with urllib3's ``stream()`` when there is one
        (its errors become requests'), else ``read()`` until it gives nothing."""
        raw = self.raw
        if hasattr(raw, "stream"):
            try:
                yield from raw.stream(chunk_size, decode_content=True)
            except Exception as e:
                err = _requests_error(e)
                if err is None:
                    raise
                raise err from e
        else:
            while True:
                chunk = raw.read(chunk_size)
                if not chunk:
                    break
                yield chunk
        self._consumed = True

    def _decode_stream(self, gen: Iterator[bytes]) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder(self.encoding or "utf-8")(errors="replace")
        for chunk in gen:
            s = decoder.decode(chunk)
            if s:
                yield s
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    def iter_lines(self, chunk_size: int = ITER_CHUNK_SIZE, decode_unicode: bool = False,
                   delimiter: Any = None) -> Iterator[Any]:
        """Iterate over the body one line at a time (without line endings)."""
        pending = None
        for chunk in self.iter_content(chunk_size=chunk_size, decode_unicode=decode_unicode):
            if pending is not None:
                chunk = pending + chunk
            lines = chunk.split(delimiter) if delimiter else chunk.splitlines()
            if lines and lines[-1] and chunk and lines[-1][-1] == chunk[-1]:
                pending = lines.pop()
            else:
                pending = None
            yield from lines
        if pending is not None:
            yield pending

    def close(self) -> None:
        """Release the connection: a streamed body not read to the end is dropped with it."""
        try:  # a try costs nothing (unlike a test of _native) where a response from the core goes
            self._native.close()
            return
        except AttributeError:
            if self._native is not None:
                raise
        # built by hand (no core), closed as requests closes it: raw unless the body was read, and a
        # urllib3-like raw's connection back to its pool
        raw = self._raw
        if raw is None:
            return
        if not self._content_consumed:
            raw.close()
        release_conn = getattr(raw, "release_conn", None)
        if release_conn is not None:
            release_conn()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()
