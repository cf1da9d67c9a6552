"""Responses.  Header bytes are prepared once (in ``__init__``, or as module constants for the
content types); ``Response.json`` keeps the bytes orjson produced - no decode/encode round-trip.

A response is itself an ASGI app: ``await response(scope, receive, send)``.
"""
from __future__ import annotations

from typing import Any, AsyncIterable, Iterable

import msgspec
import orjson

__all__ = ["Response", "JSONResponse", "HTMLResponse", "StreamingResponse", "problem", "json_bytes"]

CT_TEXT = b"text/plain; charset=utf-8"
CT_JSON = b"application/json"
CT_HTML = b"text/html; charset=utf-8"
CT_PROBLEM = b"application/problem+json"


def _default(obj: Any):
    if isinstance(obj, msgspec.Struct):
        return msgspec.structs.asdict(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")




def json_bytes(obj: Any) -> bytes:
    """Serialize ``obj`` to JSON bytes (orjson; msgspec for Structs)."""
    if isinstance(obj, msgspec.Struct):
        return msgspec.json.encode(obj)
    return orjson.dumps(obj, default=_default)


def _encode_headers(headers) -> list:
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for k, v in items:
        kb = k if isinstance(k, bytes) else k.encode("latin-1")
        vb = v if isinstance(v, bytes) else str(v).encode("latin-1")
        if b"\r" in vb or b"\n" in vb or b"\r" in kb or b"\n" in kb:
            raise ValueError("header names/values must not contain CR or LF")
        out.append((kb.lower(), vb))
    return out


class Response:
    """A complete response.  ``raw_headers`` (the ASGI byte pairs, Content-Length included) are built
    on first use: the RSGI front end never needs them for a plain response (``rsgi.response_headers``
    takes a shared list per content type and granian sets Content-Length)."""

    __slots__ = ("body", "status", "media_type", "extra", "_raw")

    def __init__(self, body: bytes | str = b"", status: int = 200, headers=None, media_type: bytes | str | None = None):
        if isinstance(body, str):
            body = body.encode()
        self.body = body
        self.status = status
        if media_type is None:
            media_type = CT_TEXT
        elif isinstance(media_type, str):
            media_type = media_type.encode("latin-1")
        self.media_type = media_type
        self.extra = _encode_headers(headers) if headers else None  # headers beyond the content type
        self._raw = None

    @property
    def raw_headers(self) -> list:
        raw = self._raw
        if raw is None:
            raw = [(b"content-type", self.media_type), (b"content-length", b"%d" % len(self.body))]
            if self.extra:
                raw.extend(self.extra)
            self._raw = raw
        return raw

    @classmethod
    def json(cls, obj: Any, status: int = 200, headers=None) -> "Response":
        return cls(json_bytes(obj), status, headers, CT_JSON)

    @classmethod
    def text(cls, text: str, status: int = 200, headers=None) -> "Response":
        return cls(text.encode(), status, headers, CT_TEXT)

    @classmethod
    def html(cls, html: str, status: int = 200, headers=None) -> "Response":
        return cls(html.encode(), status, headers, CT_HTML)

    def header(self, name: str) -> str | None:
        nb = name.lower().encode("latin-1")
        for k, v in self.raw_headers:
            if k == nb:
                return v.decode("latin-1")
        return None

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body})


def JSONResponse(obj: Any, status: int = 200, headers=None) -> Response:
    return Response(json_bytes(obj), status, headers, CT_JSON)


def HTMLResponse(html: str, status: int = 200, headers=None) -> Response:
    return Response(html.encode(), status, headers, CT_HTML)


class StreamingResponse:
    """Streams the chunks of an async (or plain) iterable with chunked transfer encoding."""

    __slots__ = ("iterable", "status", "raw_headers")

    def __init__(self, iterable: AsyncIterable | Iterable, status: int = 200, headers=None,
                 media_type: bytes | str | None = None):
        self.iterable = iterable
        self.status = status
        mt = media_type or CT_TEXT
        raw = [(b"content-type", mt.encode("latin-1") if isinstance(mt, str) else mt)]
        if headers:
            raw.extend(_encode_headers(headers))
        self.raw_headers = raw

    async def chunks(self):
        """The body chunks as bytes (``str`` chunks encoded); the iterable is closed at the end, also
        when the server stops early (client gone)."""
        it = self.iterable
        try:
            if hasattr(it, "__aiter__"):
                async for chunk in it:
                    yield chunk.encode() if isinstance(chunk, str) else chunk
            else:
                for chunk in it:
                    yield chunk.encode() if isinstance(chunk, str) else chunk
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                await aclose()

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.raw_headers})
        chunks = self.chunks()
        try:
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            await chunks.aclose()
        await send({"type": "http.response.body", "body": b""})


def problem(status: int, title: str, detail: str | None = None, *, errors: list | None = None,
            headers=None) -> Response:
    """An RFC 9457 ``application/problem+json`` response."""
    body: dict = {"type": "about:blank", "title": title, "status": status}
    if detail:
        body["detail"] = detail
    if errors:
        body["errors"] = errors
    return Response(orjson.dumps(body), status, headers, CT_PROBLEM)
