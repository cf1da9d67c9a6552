"""The RSGI front end: granian's native interface, which ``python -m aquilia_app`` serves by default.

Why: on granian, ASGI costs a scope dict per request (headers converted to bytes pairs), two message
dicts per response and an awaited ``send`` for each; RSGI hands over a scope object whose fields are
read on demand and takes a whole response in one call (``response_bytes``).  The request path is the
same ``App._dispatch`` as under ASGI; only the way in and out differs.

Middleware stays pure ASGI: an app that has any runs every RSGI request through its ASGI chain with
the adapter below (``serve_asgi``) - the same behaviour, at ASGI's cost.

The adapter and the lazily built ASGI scope are written here by hand: granian offers no RSGI-to-ASGI
bridge, and the mapping is a few fields (RSGI spec: granian's ``docs/spec/RSGI.md``).
"""
from __future__ import annotations

from .exceptions import BadRequest, PayloadTooLarge
from .requests import DEFAULT_MAX_BODY, Headers, Request
from .responses import CT_HTML, CT_JSON, CT_PROBLEM, CT_TEXT, Response

__all__ = ["RSGIRequest", "asgi_scope", "response_headers", "serve_asgi"]

# The headers of a plain response, per content type: one shared list, no per-request conversion.
# granian computes Content-Length itself for a bytes body.
_BY_TYPE = {ct: [("content-type", ct.decode("latin-1"))] for ct in (CT_TEXT, CT_JSON, CT_HTML, CT_PROBLEM)}


def response_headers(resp) -> list:
    """RSGI (str) headers for a ``Response`` (or subclass) or a ``PerRequestResponse``, without the
    Content-Length of a ``Response``: granian sets it from the body it is given."""
    if resp.__class__ is not Response:
        return _headers_of_other(resp)
    if resp.extra is None:  # the common case: a shared list
        h = _BY_TYPE.get(resp.media_type)
        if h is not None:
            return h
    # straight from the parts: the ASGI pairs (with a Content-Length to drop) are never built
    return [("content-type", resp.media_type.decode("latin-1"))] + [
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.extra or ()]


def _headers_of_other(resp) -> list:
    """A ``Response`` subclass (its ``raw_headers``, which it may override, minus Content-Length) or a
    ``PerRequestResponse`` (its raw headers as they are: a file's Content-Length is granian's only
    source for it, ``response_file`` would otherwise send chunks)."""
    if isinstance(resp, Response):
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers if k != b"content-length"]
    return resp.rsgi_headers()


def _addr(s: str):
    host, _, port = s.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return s, None


def asgi_scope(rscope, app=None) -> dict:
    """The ASGI ``http`` scope equivalent to an RSGI scope."""
    qs = rscope.query_string
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": rscope.http_version,
        "method": rscope.method,
        "scheme": rscope.scheme,
        "path": rscope.path,
        "raw_path": rscope.path.encode(),
        # granian decodes the query as UTF-8 (it refuses bytes that are not): encoding it back gives the bytes
        # the client sent, as an ASGI server passes them (latin-1 failed on "€" and mangled "é")
        "query_string": qs.encode() if qs else b"",
        "root_path": "",
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in rscope.headers.items()],
        "client": _addr(rscope.client),
        "server": _addr(rscope.server),
        "app": app,
    }


class RSGIRequest(Request):
    """``Request`` over an RSGI scope and protocol: same interface, fields read on demand."""

    __slots__ = ("rsgi_scope", "proto", "_asgi")

    def __init__(self, rscope, proto, path_params=None, max_body: int = DEFAULT_MAX_BODY, app=None):
        Request.__init__(self, None, None, path_params, max_body, app)
        self.rsgi_scope = rscope
        self.proto = proto

    @property
    def scope(self) -> dict:
        """An ASGI-shaped scope, built on first use (code written against ASGI keeps working)."""
        s = self._asgi
        if s is None:
            s = self._asgi = asgi_scope(self.rsgi_scope, self.app)
        return s

    @scope.setter
    def scope(self, value) -> None:
        self._asgi = value

    def _from_scope(self, key: str):  # no ASGI middleware put anything in a scope never built
        s = self._asgi
        return s.get(key) if s is not None else None

    @property
    def method(self) -> str:
        return self.rsgi_scope.method

    @property
    def path(self) -> str:
        return self.rsgi_scope.path

    @property
    def route_path(self) -> str:  # RSGI has no root path
        return self.rsgi_scope.path

    @property
    def root_path(self) -> str:
        return ""

    @property
    def headers(self) -> Headers:
        h = self._headers
        if h is None:
            h = self._headers = Headers(self.rsgi_scope.headers.items())
        return h

    def header(self, name: str, default: str | None = None) -> str | None:
        if self._headers is not None:
            return self._headers.get(name, default)
        values = self.rsgi_scope.headers.get_all(name.lower())
        if not values:
            return default
        return values[0] if len(values) == 1 else ", ".join(values)

    def _raw_query(self) -> str:  # for Request.query, query_multi, query_list (cookies need no override)
        return self.rsgi_scope.query_string

    async def _read_all(self, declared: int | None, limit: int) -> bytes:
        """A declared length (already checked against ``limit``) is read whole by granian in one call
        (``await proto()``: a quarter faster than iterating); a chunked body goes chunk by chunk."""
        if declared is None:
            chunks = []
            size = 0
            async for chunk in self._chunks():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(limit)
                chunks.append(chunk)
            return b"".join(chunks)
        try:
            return await self.proto()
        except RuntimeError as e:  # RSGIProtocolClosed / RSGIProtocolError: the client went away
            raise BadRequest(f"the request body could not be read: {e}") from None

    async def _wait_disconnected(self) -> None:
        await self.proto.client_disconnect()

    async def _chunks(self):
        try:
            async for chunk in self.proto:
                if chunk:
                    yield chunk
        except RuntimeError as e:  # RSGIProtocolClosed / RSGIProtocolError: the client went away
            raise BadRequest(f"the request body could not be read: {e}") from None


async def serve_asgi(asgi_app, scope: dict, proto, body: bytes | None = None) -> None:
    """Run one RSGI request through an ASGI app, given the request's ASGI ``scope`` (used when the app
    has ASGI middleware, and for mounted ASGI apps).  ``body``: the request body when it was already
    read, handed to the app as one message."""
    chunks = proto.__aiter__() if body is None else None
    body_done = False

    async def receive() -> dict:
        nonlocal body_done, body
        if body is not None:
            msg = {"type": "http.request", "body": body, "more_body": False}
            body, body_done = None, True
            return msg
        if body_done:
            await proto.client_disconnect()
            return {"type": "http.disconnect"}
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            body_done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        except RuntimeError:  # the client went away mid-body
            body_done = True
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunk, "more_body": True}

    start = None  # (status, str headers) once http.response.start came
    stream = None
    done = False

    async def send(msg: dict) -> None:
        nonlocal start, stream, done
        t = msg["type"]
        if t == "http.response.start":
            if start is not None:
                raise RuntimeError("http.response.start sent twice")
            start = (msg["status"], [(k.decode("latin-1"), v.decode("latin-1")) for k, v in msg.get("headers", ())])
        elif t == "http.response.body":
            if start is None or done:
                raise RuntimeError("http.response.body before http.response.start or after the last body")
            data = msg.get("body", b"")
            more = msg.get("more_body", False)
            if stream is None and not more:  # the whole body in one message
                proto.response_bytes(start[0], start[1], data)
                done = True
                return
            if stream is None:
                stream = proto.response_stream(start[0], start[1])
            if data:
                try:
                    await stream.send_bytes(data)
                except RuntimeError as e:  # granian's RSGIProtocolClosed: as uvicorn, an OSError (ASGI 2.4)
                    raise OSError(f"the client went away: {e}") from None
            done = not more

    await asgi_app(scope, receive, send)
    if start is None:
        proto.response_bytes(500, [("content-type", "text/plain; charset=utf-8")], b"no response")
