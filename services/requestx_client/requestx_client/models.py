"""``Response``, with the attributes requests users rely on; ``Request`` and ``PreparedRequest``
(defined in ``_request.py``) are importable from here, as from ``requests.models``."""

from __future__ import annotations

import codecs
import datetime
import json as _json
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode  # noqa: F401  (requests.models re-exports it)

from . import exceptions as exc
from ._json import loads_like_json
from ._request import PreparedRequest, Request
from .cookies import RequestsCookieJar, extract_cookies_to_jar
from .structures import CaseInsensitiveDict

__all__ = ["PreparedRequest", "Request", "Response", "REDIRECT_STATI", "ITER_CHUNK_SIZE"]

REDIRECT_STATI = frozenset((301, 302, 303, 307, 308))
_REASONS = {s.value: s.phrase for s in HTTPStatus}
ITER_CHUNK_SIZE = 512


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


class Response:
    """An HTTP response. ``content``/``text``/``json()`` read the body on first use."""

    __attrs__ = ("status_code", "url", "history", "encoding", "reason", "elapsed", "request")

    # Per-response state starts as these class-level defaults and becomes an instance attribute when
    # first set: a response that is only read costs fewer attribute stores (a hot path).
    _headers: CaseInsensitiveDict | None = None
    _cookies: RequestsCookieJar | None = None
    _encoding: str | None = None
    _encoding_set = False
    _consumed_by_iter = False
    raw = None
    connection = None  # the adapter that sent the request
    _next: PreparedRequest | None = None

    def __init__(self, native: Any, request: PreparedRequest | None = None,
                 elapsed: datetime.timedelta | float | None = None) -> None:
        self._native = native
        if native is not None:
            self.status_code: int = native.status
            self.url: str = native.url
        else:
            self.status_code = 0
            self.url = ""
        self.history: list[Response] = []
        self.request = request
        self._elapsed = elapsed

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
    def reason(self) -> str:
        return _REASONS.get(self.status_code, "")

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"<Response [{self.status_code}]>"

    @property
    def is_redirect(self) -> bool:
        return self.status_code in REDIRECT_STATI and self._native.header("location") is not None

    @property
    def next(self) -> PreparedRequest | None:
        """The request a redirect leads to, when it was not followed (``allow_redirects=False``)."""
        return self._next

    @property
    def is_permanent_redirect(self) -> bool:
        return self.status_code in (301, 308) and self._native.header("location") is not None

    @property
    def http_version(self) -> str:
        return self._native.http_version

    def raise_for_status(self) -> None:
        """Raise ``HTTPError`` for a 4xx or 5xx status."""
        code = self.status_code
        if 400 <= code < 600:
            kind = "Client" if code < 500 else "Server"
            raise exc.HTTPError(f"{code} {kind} Error: {self.reason} for url: {self.url}", response=self)

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
    def headers(self, value: CaseInsensitiveDict) -> None:
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

    @property
    def links(self) -> dict[str, dict[str, str]]:
        header = self._native.header("link")
        result: dict[str, dict[str, str]] = {}
        if not header:
            return result
        for val in header.split(","):
            url, _, params = val.partition(";")
            link = {"url": url.strip(" <>'\"")}
            for p in params.split(";"):
                k, sep, v = p.partition("=")
                if sep:
                    link[k.strip(" '\"")] = v.strip(" '\"")
            result[link.get("rel") or link["url"]] = link
        return result

    # --- body ---
    @property
    def content(self) -> bytes:
        if self._consumed_by_iter:
            raise exc.StreamConsumedError("the content was already consumed by iter_content()")
        return self._native.content()

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
        data = self.content
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
        if not kwargs:
            enc = self.encoding
            if enc is None or _is_utf8(enc):
                return loads_like_json(self._native, self.content, self._json_text)
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
        if self._consumed_by_iter:
            raise exc.StreamConsumedError("the content was already consumed by iter_content()")
        native = self._native
        if native.is_consumed():
            data = native.content()
            step = chunk_size or max(len(data), 1)
            gen: Iterator[bytes] = (data[i:i + step] for i in range(0, len(data), step))
        else:
            self._consumed_by_iter = True

            def stream() -> Iterator[bytes]:
                read = native.read_chunk
                while True:
                    piece = read(chunk_size)
                    if piece is None:
                        return
                    yield piece
            gen = stream()
        if decode_unicode:
            return self._decode_stream(gen)
        return gen

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
        """Release the connection of a streamed response that was not read to the end."""
        self._native.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()
