"""Response compression (gzip, br, zstd) negotiated from ``Accept-Encoding``, as native middleware.

What is compressed: a ``Response`` whose body is at least ``minimum_size`` bytes (compressed whole,
in memory, like the body itself) and a ``StreamingResponse`` (compressed chunk by chunk with a
flush after each, so the client gets every chunk as soon as the handler yields it).  Never: HEAD,
1xx/204/206/304 and other statuses without a representation body, responses that already have a
``Content-Encoding``, ``Cache-Control: no-transform``, media types that are already compressed
(images, audio, video, archives - see ``compressible``), files (``FileResponse``: ranges and
pre-compressed files) and server-sent events (each event must go out at once).

A compressed response gets ``Content-Encoding``, loses ``Content-Length`` (the framework or server
counts the new body) and ``Accept-Ranges``, and its strong ``ETag`` becomes weak (RFC 9110 8.8.1:
the bytes differ from the identity representation's).  Every response that *could* be compressed
says ``Vary: Accept-Encoding``, also when this client did not ask for compression, so that caches
keep the two representations apart (added to the response's own ``Vary``, unless that already names
Accept-Encoding or is ``*``); a HEAD response, never compressed, says it too, as its GET would.

The ``Accept-Encoding`` negotiation (RFC 9110 12.5.3) is written here by hand: no library parses it
for us.  The codecs are zlib (stdlib), ``brotli`` and ``zstandard``.
"""
from __future__ import annotations

import re
import zlib
from typing import Iterable

from .middleware import Middleware
from .responses import Response, StreamingResponse

__all__ = ["CompressionMiddleware", "negotiate", "compressible"]

CODINGS = ("zstd", "br", "gzip")
_ALIASES = {"x-gzip": "gzip"}  # RFC 9110 8.4.1.3: a recipient SHOULD treat x-gzip as gzip
_NO_BODY_STATUSES = frozenset((204, 206, 304))
# content-encoding: only "identity" can be there (anything else is never compressed), and it is replaced
_DROPPED = frozenset((b"content-length", b"accept-ranges", b"content-encoding"))
_VARY = (b"vary", b"Accept-Encoding")
_CACHE_LIMIT = 256  # distinct Accept-Encoding / Content-Type values remembered (a few in practice)

# -- media types -------------------------------------------------------------------------------------
# Compressible: text (except event streams), JSON, XML, JavaScript and their +json/+xml relatives,
# and a few uncompressed binary formats.  Everything else (image/*, audio/*, video/*, archives,
# octet-stream, woff2, pdf ...) is either compressed already or unknown, and left alone.
_TEXT_SUBTYPES = frozenset(("json", "xml", "javascript", "ecmascript", "x-javascript", "graphql",
                            "x-www-form-urlencoded", "wasm", "x-ndjson", "ndjson", "jsonl", "yaml", "x-yaml",
                            "toml", "manifest+json", "ld+json", "geo+json", "vnd.api+json"))
_OTHER = frozenset(("image/svg+xml", "image/x-icon", "image/vnd.microsoft.icon", "image/bmp", "font/ttf",
                    "font/otf", "application/vnd.ms-fontobject"))


def compressible(media_type: str) -> bool:
    """Whether a body of this media type (parameters allowed) is worth compressing."""
    mt = media_type.partition(";")[0].strip().lower()
    kind, _, sub = mt.partition("/")
    if kind == "text":
        return sub != "event-stream"
    if mt in _OTHER:
        return True
    return kind == "application" and (sub in _TEXT_SUBTYPES or sub.endswith(("+json", "+xml")))


# -- Accept-Encoding ---------------------------------------------------------------------------------
_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)\Z")  # RFC 9110 12.4.2 qvalue


def _qvalue(params: str) -> float | None:
    """The ``q`` of ``;q=0.8`` parameters (1 when absent), None when it is not a valid qvalue."""
    for param in params.split(";"):
        name, eq, value = param.partition("=")
        if name.strip().lower() == "q" and eq:
            value = value.strip()
            return float(value) if _QVALUE.match(value) else None
    return 1.0


def _weights(header: str) -> dict:
    """``Accept-Encoding`` as {coding: q}; malformed members are skipped (a client's typo must not
    break its response); a coding listed twice keeps its first weight."""
    out: dict = {}
    for member in header.split(","):
        coding, _, params = member.partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        q = _qvalue(params) if params else 1.0
        if q is not None:
            out.setdefault(_ALIASES.get(coding, coding), q)
    return out


def negotiate(header: str | None, offered: Iterable[str]) -> str | None:
    """The coding to use among ``offered`` (in the server's order of preference), or None for
    identity.  RFC 9110 12.5.3: the highest q wins, ``*`` stands for every coding not listed, q=0
    means "not acceptable"; ties go to the server's preference, and an ``identity`` the client
    weighs above every coding on offer wins (no compression).  Without the header we do not
    compress: any coding would be allowed, but old clients that omit it often cannot decode one."""
    if not header:
        return None
    weights = _weights(header)
    star = weights.get("*", 0.0)
    best, best_q = None, 0.0
    for coding in offered:
        q = weights.get(coding, star)
        if q > best_q:
            best, best_q = coding, q
    # only an explicit identity counts: unlisted, it is merely acceptable, not preferred
    if best is not None and weights.get("identity", 0.0) > best_q:
        return None
    return best


# -- codecs --------------------------------------------------------------------------------------------
class _Codecs:
    """The configured codecs: whole-body ``compress`` and per-stream ``stream`` objects."""

    def __init__(self, encodings: tuple, gzip_level: int, brotli_quality: int, zstd_level: int):
        self.gzip_level, self.brotli_quality, self.zstd_level = gzip_level, brotli_quality, zstd_level
        self.brotli = self.zstandard = None
        if "br" in encodings:
            import brotli
            self.brotli = brotli
        if "zstd" in encodings:
            import zstandard
            self.zstandard = zstandard
            # One compressor for whole bodies: ``compress`` runs to the end without yielding to the
            # loop, so no two calls overlap.  Streams each get their own (they interleave).
            self._zstd_whole = zstandard.ZstdCompressor(level=zstd_level)

    def compress(self, coding: str, data: bytes) -> bytes:
        if coding == "gzip":
            c = zlib.compressobj(self.gzip_level, zlib.DEFLATED, 31)  # wbits 16+15: the gzip container
            return c.compress(data) + c.flush()
        if coding == "br":
            return self.brotli.compress(data, quality=self.brotli_quality)
        return self._zstd_whole.compress(data)

    def stream(self, coding: str) -> "_Stream":
        if coding == "gzip":
            c = zlib.compressobj(self.gzip_level, zlib.DEFLATED, 31)
            return _Stream(c.compress, lambda: c.flush(zlib.Z_SYNC_FLUSH), c.flush)
        if coding == "br":
            c = self.brotli.Compressor(quality=self.brotli_quality)
            return _Stream(c.process, c.flush, c.finish)
        c = self.zstandard.ZstdCompressor(level=self.zstd_level).compressobj()
        block = self.zstandard.COMPRESSOBJ_FLUSH_BLOCK
        return _Stream(c.compress, lambda: c.flush(block), c.flush)


class _Stream:
    """One streaming compressor: ``chunk(data)`` returns everything needed to decode ``data`` now
    (compress, then flush), ``finish()`` the end of the stream."""

    __slots__ = ("_compress", "_flush", "finish")

    def __init__(self, compress, flush, finish):
        self._compress, self._flush, self.finish = compress, flush, finish

    def chunk(self, data: bytes) -> bytes:
        return self._compress(data) + self._flush()


async def _compressed(chunks, stream: _Stream):
    """The compressed form of the async generator ``chunks`` (closed at the end, also on early exit)."""
    try:
        async for data in chunks:
            if data:
                out = stream.chunk(data)
                if out:
                    yield out
        tail = stream.finish()
        if tail:
            yield tail
    finally:
        await chunks.aclose()


def _weak_etag(value: bytes) -> bytes:
    return value if value.startswith(b"W/") else b"W/" + value


def _varies(headers) -> bool:
    """Whether a ``Vary`` already covers Accept-Encoding (named, or ``*``): no second one then."""
    for k, v in headers or ():
        if k == b"vary":
            for name in v.split(b","):
                name = name.strip().lower()
                if name == b"accept-encoding" or name == b"*":
                    return True
    return False


def _adjusted(headers, coding: str) -> list:
    """Headers of the compressed form: length and ranges dropped, ETag weakened, coding and Vary added."""
    out = [(k, _weak_etag(v) if k == b"etag" else v) for k, v in headers or () if k not in _DROPPED]
    out.append((b"content-encoding", coding.encode()))
    if not _varies(headers):
        out.append(_VARY)
    return out


def _find(headers, name: bytes) -> bytes | None:
    for k, v in headers or ():
        if k == name:
            return v
    return None


class CompressionMiddleware(Middleware):
    """See the module docstring.  ``encodings``: the codings offered, in order of preference."""

    def __init__(self, minimum_size: int = 500, gzip_level: int = 6, brotli_quality: int = 4,
                 zstd_level: int = 3, encodings: Iterable[str] = CODINGS):
        _check_int("minimum_size", minimum_size, 0, None)
        _check_int("gzip_level", gzip_level, 1, 9)
        _check_int("brotli_quality", brotli_quality, 0, 11)
        _check_int("zstd_level", zstd_level, 1, 22)
        if isinstance(encodings, str):
            raise TypeError(f"encodings is a list of codings, not the string {encodings!r}")
        encodings = tuple(encodings)
        unknown = [e for e in encodings if e not in CODINGS]
        if unknown or not encodings or len(set(encodings)) != len(encodings):
            raise ValueError(f"encodings must be distinct codings among {', '.join(CODINGS)}, not {encodings!r}")
        self.minimum_size = minimum_size
        self.encodings = encodings
        self.codecs = _Codecs(encodings, gzip_level, brotli_quality, zstd_level)
        self._chosen: dict = {}  # Accept-Encoding value -> coding or None
        self._types: dict = {}  # media type bytes -> compressible?

    async def __call__(self, request, call_next):
        response = await call_next(request)
        if response.status < 200 or response.status in _NO_BODY_STATUSES:
            return response
        if request.method == "HEAD":  # never compressed, but a cache must know the GET varies
            return self._head(response)
        if response.__class__ is Response or isinstance(response, Response):
            if len(response.body) < self.minimum_size or not self._candidate(response.media_type, response.extra):
                return response
            return self._whole(response, self.coding_for(request))
        if isinstance(response, StreamingResponse):  # not files nor SSE: PerRequestResponse siblings
            raw = response.raw_headers
            length = _find(raw, b"content-length")
            if length is not None and length.isdigit() and int(length) < self.minimum_size:
                return response
            if self._candidate(_find(raw, b"content-type") or b"", raw):
                self._stream(response, self.coding_for(request))
        return response

    def _head(self, response):
        """A HEAD response: unchanged, plus the ``Vary`` its GET would carry (RFC 9110 9.3.2: the
        same header fields as GET; 12.5.5: Vary on every response selected by Accept-Encoding)."""
        if isinstance(response, Response):
            if len(response.body) >= self.minimum_size and self._candidate(response.media_type, response.extra) \
                    and not _varies(response.extra):
                return response.with_headers([_VARY])
        elif isinstance(response, StreamingResponse):
            raw = response.raw_headers
            if self._candidate(_find(raw, b"content-type") or b"", raw) and not _varies(raw):
                raw.append(_VARY)
        return response

    def _candidate(self, media_type: bytes, headers) -> bool:
        """Compressible type, not encoded yet, and no ``no-transform``."""
        ok = self._types.get(media_type)
        if ok is None:
            ok = compressible(media_type.decode("latin-1"))
            _remember(self._types, media_type, ok)
        if not ok or headers is None:
            return ok
        encoding = _find(headers, b"content-encoding")
        if encoding is not None and encoding.strip().lower() != b"identity":
            return False
        cache_control = _find(headers, b"cache-control")
        return cache_control is None or b"no-transform" not in cache_control.lower()

    def coding_for(self, request) -> str | None:
        header = request.headers.get("accept-encoding")  # every line of it, joined
        if header is None:
            return None
        try:
            return self._chosen[header]
        except KeyError:
            coding = negotiate(header, self.encodings)
            _remember(self._chosen, header, coding)
            return coding

    def _whole(self, response: Response, coding: str | None) -> Response:
        if coding is None:
            return response if _varies(response.extra) else response.with_headers([_VARY])
        out = Response(self.codecs.compress(coding, response.body), response.status, None, response.media_type)
        out.extra = _adjusted(response.extra, coding)
        return out

    def _stream(self, response: StreamingResponse, coding: str | None) -> None:
        """Compress a per-request stream in place: its iterable becomes the compressed chunks."""
        if coding is None:
            if not _varies(response.raw_headers):
                response.raw_headers.append(_VARY)
            return
        response.raw_headers = _adjusted(response.raw_headers, coding)
        # the original chunks, as bytes and closed at the end, by StreamingResponse.chunks (which reads
        # ``iterable`` only when first iterated, so it must be given the original, not the response)
        original = StreamingResponse(response.iterable).chunks()
        response.iterable = _compressed(original, self.codecs.stream(coding))


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= _CACHE_LIMIT:  # bounded: arbitrary client-sent values cannot grow it
        cache.clear()
    cache[key] = value


def _check_int(name: str, value, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, not {value!r}")
