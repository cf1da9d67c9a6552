"""The request object.  Nothing is parsed until asked for: the header index and the query dict are
built lazily on first access; the body is read once, with a size limit (413) and, when the app sets
one, a time limit for the whole body (408)."""
from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import orjson

from .exceptions import BadRequest, HTTPException, PayloadTooLarge, RequestTimeout, ValidationFailed

__all__ = ["Request", "Headers"]

DEFAULT_MAX_BODY = 1 << 20


class Headers:
    """Case-insensitive, read-only view over raw header pairs, indexed on first lookup."""

    __slots__ = ("raw", "_index")

    def __init__(self, raw: list):
        self.raw = raw
        self._index = None

    def _build(self) -> dict:
        idx: dict[str, list[str]] = {}
        for k, v in self.raw:  # bytes pairs (ASGI) or str pairs (RSGI)
            if k.__class__ is bytes:
                k, v = k.decode("latin-1"), v.decode("latin-1")
            idx.setdefault(k.lower(), []).append(v)
        self._index = idx
        return idx

    def get(self, name: str, default: str | None = None) -> str | None:
        vals = (self._index or self._build()).get(name.lower())
        return ", ".join(vals) if vals else default

    def getall(self, name: str) -> list[str]:
        return list((self._index or self._build()).get(name.lower(), ()))

    def __getitem__(self, name: str) -> str:
        v = self.get(name)
        if v is None:
            raise KeyError(name)
        return v

    def __contains__(self, name: str) -> bool:
        return name.lower() in (self._index or self._build())

    def __len__(self) -> int:
        return len(self.raw)

    def keys(self):
        return (self._index or self._build()).keys()


class Request:
    """A request seen through ASGI (``scope`` dict + ``receive``); ``rsgi.RSGIRequest`` is the same
    interface over granian's RSGI scope and protocol.  ``app`` is the ``App`` serving it."""

    __slots__ = ("scope", "receive", "path_params", "max_body", "_headers", "_query", "_body", "state", "app")

    def __init__(self, scope, receive, path_params=None, max_body: int = DEFAULT_MAX_BODY, app=None):
        self.scope = scope
        self.receive = receive
        self.path_params = path_params
        self.max_body = max_body
        self._headers = None
        self._query = None
        self._body = None
        self.state = None
        self.app = app

    @property
    def method(self) -> str:
        return self.scope["method"]

    @property
    def path(self) -> str:
        return self.scope["path"]

    @property
    def headers(self) -> Headers:
        h = self._headers
        if h is None:
            h = self._headers = Headers(self.scope["headers"])
        return h

    def header(self, name: str, default: str | None = None) -> str | None:
        """One header without building the index (a linear scan over the raw pairs)."""
        if self._headers is not None:
            return self._headers.get(name, default)
        nb = name.lower().encode("latin-1")
        for k, v in self.scope["headers"]:
            if k == nb:
                return v.decode("latin-1")
        return default

    @property
    def query(self) -> dict[str, str]:
        q = self._query
        if q is None:
            qs = self.scope.get("query_string", b"")
            q = self._query = dict(parse_qsl(qs.decode("latin-1"), keep_blank_values=True)) if qs else {}
        return q

    async def body(self) -> bytes:
        """The whole body: 413 over ``max_body``, 408 when it takes longer than the app's ``body_timeout``."""
        if self._body is not None:
            return self._body
        app = self.app
        return await self._read_body(self.max_body, app.body_timeout if app is not None else None)

    async def drain(self, limit: int, timeout: float) -> bool:
        """Read a body nobody asked for, so the server can reuse the connection: True when it was at
        most ``limit`` bytes and came within ``timeout`` seconds (it is then kept as the body)."""
        if self._body is not None:
            return True
        try:
            await self._read_body(limit, timeout)
        except HTTPException:
            return False
        return True

    async def _read_body(self, limit: int, timeout: float | None) -> bytes:
        cl = self.header("content-length")
        if cl is not None:
            if not cl.isdigit():
                raise BadRequest("invalid Content-Length")
            if int(cl) > limit:
                raise PayloadTooLarge(limit)
        chunks = []
        size = 0
        try:
            async with asyncio.timeout(timeout):  # None: no limit
                async for chunk in self._chunks():
                    size += len(chunk)
                    if size > limit:  # per chunk: a chunked upload is refused before it is all in memory
                        raise PayloadTooLarge(limit)
                    chunks.append(chunk)
        except TimeoutError:
            raise RequestTimeout(timeout) from None
        self._body = b"".join(chunks)
        return self._body

    async def _chunks(self):
        """The body's chunks as the server delivers them (ASGI ``http.request`` messages)."""
        receive = self.receive
        while True:
            msg = await receive()
            t = msg["type"]
            if t == "http.request":
                chunk = msg.get("body", b"")
                if chunk:
                    yield chunk
                if not msg.get("more_body", False):
                    return
            elif t == "http.disconnect":
                raise BadRequest("client disconnected before the body was complete")

    async def json(self) -> Any:
        body = await self.body()
        if not body:
            raise BadRequest("request body is empty; JSON expected")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise BadRequest(f"malformed JSON: {e}") from None

    async def decode(self, type_: Any) -> Any:
        """Decode and validate the JSON body into ``type_`` (a msgspec Struct, list[...], ...)."""
        body = await self.body()
        if not body:
            raise BadRequest("request body is empty; JSON expected")
        try:
            return msgspec.json.decode(body, type=type_)
        except msgspec.ValidationError as e:
            raise ValidationFailed(str(e)) from None
        except msgspec.DecodeError as e:
            raise BadRequest(f"malformed JSON: {e}") from None
