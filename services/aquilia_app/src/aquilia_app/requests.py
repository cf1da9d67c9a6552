"""The request object.  Nothing is parsed until asked for: the header index, the query dict, the
multi-valued query, the cookies and the form are built lazily on first access; the body is read
once, with a size limit (413) and, when the app sets one, a time limit for the whole body (408)."""
from __future__ import annotations

import asyncio
import re
from time import monotonic
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

import msgspec
import orjson

from .deadlines import deadline
from .exceptions import BadRequest, HTTPException, PayloadTooLarge, RequestTimeout, ValidationFailed
from .responses import wait_for_disconnect
from .routing import encode_path
from .state import State

__all__ = ["Request", "Headers", "Address", "parse_cookie_header", "route_path"]

DEFAULT_MAX_BODY = 1 << 20


class _Consumed(bytes):
    """Type of ``STREAM_CONSUMED``: an empty bytes the body slot holds once a stream reader (the
    form parser) read the body to its end without keeping it."""


STREAM_CONSUMED = _Consumed()

def route_path(scope: dict) -> str:
    """``scope["path"]`` less ``scope["root_path"]``: an ASGI server (uvicorn's ``--root-path``) and an
    app that mounts another keep the root path in ``path`` (the ASGI spec, as Starlette reads it).  A
    path that is not under the root ("/apiary" under "/api") is returned as it is."""
    path = scope["path"]
    root = scope.get("root_path")
    if not root or not path.startswith(root):
        return path
    rest = path[len(root):]
    if not rest:
        return "/"
    return rest if rest[0] == "/" else path


class Address(NamedTuple):
    """The peer of a connection (``request.client``)."""
    host: str
    port: int | None


def parse_cookie_header(value: str) -> dict[str, str]:
    """``name=value; name2=value2`` (RFC 6265 section 5.4) into a dict, tolerantly: a pair without
    ``=`` or with an empty name is skipped, surrounding double quotes are dropped (and the backslash
    escapes inside undone, as ``http.cookies`` does: ``set_cookie`` writes them), and the first of
    repeated names wins (browsers send the most specific path first).

    Written by hand because ``http.cookies.SimpleCookie`` follows the stricter RFC 2109 grammar and
    drops every cookie after the first one it cannot parse (one bad cookie set by some other app on
    the same domain would hide the session cookie)."""
    out: dict[str, str] = {}
    for pair in value.split(";"):
        name, eq, val = pair.partition("=")
        name = name.strip()
        if not eq or not name:
            continue
        val = val.strip()
        if len(val) >= 2 and val[0] == '"' and val[-1] == '"':
            val = val[1:-1]
            if "\\" in val:
                val = _COOKIE_ESCAPE.sub(_unescape, val)
        out.setdefault(name, val)
    return out


# ``\ooo`` (octal, up to \377) or ``\`` before any other character; a lone trailing ``\`` stays
_COOKIE_ESCAPE = re.compile(r"\\(?:([0-3][0-7]{2})|(.))", re.DOTALL)


def _unescape(m) -> str:
    return chr(int(m.group(1), 8)) if m.group(1) else m.group(2)


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

    __slots__ = ("scope", "receive", "path_params", "max_body", "_headers", "_query", "_body", "di", "app",
                 "route", "_session", "background", "exc", "_form", "_watch",
                 "_query_multi", "_cookies", "_state")  # the last three: set on first use, not in __init__

    def __init__(self, scope, receive, path_params=None, max_body: int = DEFAULT_MAX_BODY, app=None):
        self.scope = scope
        self.receive = receive
        self.path_params = path_params
        self.max_body = max_body
        self._headers = None
        self._query = None
        self._body = None
        self.di = None  # the request's DI scope (di.RequestScope), when its handler needs one
        self.app = app
        self.route = None  # the matched Route (set on the middleware path, where routing runs inside the chain)
        self._session = None  # a dict, when the sessions middleware runs
        self.background = None  # BackgroundTasks, when the handler asked for them
        self.exc = None  # the handler's exception, for the DI scope's teardown (middleware path)
        self._form = None  # FormData once read; the app's teardown checks it to close uploaded files
        self._watch = None  # is_disconnected's task; set here because every request's teardown reads it

    @property
    def method(self) -> str:
        return self.scope["method"]

    @property
    def path(self) -> str:
        return self.scope["path"]

    def _from_scope(self, key: str):
        """What a pure-ASGI middleware put in the ASGI scope under ``key`` (None when nothing)."""
        scope = self.scope
        return scope.get(key) if scope is not None else None

    @property
    def session(self):
        """The session dict: ``SessionMiddleware``'s, else the one a pure-ASGI session middleware
        (Starlette's) keeps in ``scope["session"]``; None without one."""
        s = self._session
        return s if s is not None else self._from_scope("session")

    @session.setter
    def session(self, value) -> None:
        self._session = value

    @property
    def state(self) -> State:
        """Values for this request (middleware sets them for the handler: ``request.state.user``),
        starting as a copy of what the app's lifespan yielded, if it yielded a mapping, with what a
        pure-ASGI middleware put in ``scope["state"]`` (Starlette's ``request.state``) over it."""
        try:
            return self._state
        except AttributeError:  # the first use
            app = self.app
            state = self._state = State(app.lifespan_state if app is not None else None)
            extra = self._from_scope("state")
            if extra:
                state.__dict__.update(extra)
            return state

    @property
    def route_path(self) -> str:
        """The path the app routes on: ``path`` less the ``root_path`` the app is mounted at."""
        return route_path(self.scope)

    @property
    def root_path(self) -> str:
        """The prefix the app is served under (``--root-path``, a mounting app) when ``path`` is under
        it, else ``""``: what ``route_path`` took off."""
        root = self.scope.get("root_path")
        return root if root and route_path(self.scope) != self.path else ""

    @property
    def client(self) -> Address | None:
        """The peer's address; None when the server gives none (a Unix socket)."""
        c = self.scope.get("client")
        if not c:
            return None
        return Address(c[0], None if c[1] is None else int(c[1]))  # granian's ASGI scope gives a str

    @property
    def base_url(self) -> str:
        """``scheme://host/`` as the client addressed the server (the Host header; else the server's own
        address), with the root path the app is mounted at.  Check the Host with
        ``TrustedHostMiddleware`` before putting it in a page or a mail."""
        return f"{self._origin()}{encode_path(self.scope.get('root_path', ''))}/"

    @property
    def url(self) -> str:
        """The full URL of the request (path percent-encoded, query string as received); the path
        already holds the root path (ASGI)."""
        qs = self.query_string
        url = self._origin() + encode_path(self.path)
        return f"{url}?{qs}" if qs else url

    def _origin(self) -> str:
        scope = self.scope
        host = self.header("host")
        if not host:
            server = scope.get("server")
            host = f"{server[0]}:{server[1]}" if server else "localhost"
        return f"{scope.get('scheme', 'http')}://{host}"

    def url_for(self, name: str, /, **params) -> str:
        """The absolute URL of the route called ``name`` (``App.url_for`` gives the path alone)."""
        return self.base_url[:-1] + self.app.url_for(name, **params)

    @property
    def headers(self) -> Headers:
        h = self._headers
        if h is None:
            h = self._headers = Headers(self.scope["headers"])
        return h

    def header(self, name: str, default: str | None = None) -> str | None:
        """One header without building the index (a linear scan over the raw pairs); a header sent
        several times is its values joined with ", ", as ``headers.get`` gives it (RFC 9110 5.3)."""
        if self._headers is not None:
            return self._headers.get(name, default)
        try:
            nb = name.lower().encode("latin-1")
        except UnicodeEncodeError:  # no header has such a name (RSGIRequest.header gives the default too)
            return default
        found = None
        for k, v in self.scope["headers"]:
            if k == nb:
                found = v.decode("latin-1") if found is None else f"{found}, {v.decode('latin-1')}"
        return default if found is None else found

    @property
    def query(self) -> dict[str, str]:
        """The query parameters (the last value of a repeated one), parsed on first use."""
        q = self._query
        if q is None:
            qs = self._raw_query()
            q = self._query = dict(parse_qsl(qs, keep_blank_values=True)) if qs else {}
        return q

    # ``_query_multi`` and ``_cookies`` are left unset by __init__ (a request that never uses them pays
    # nothing): the first access finds no attribute and builds the value.
    def _raw_query(self) -> str:
        """The query string as text: the one thing each front end reads its own way.  Raw bytes above
        ASCII (a client that did not percent-encode; granian passes them) are read as UTF-8, as granian's
        RSGI gives them, so ``query``, ``url`` and redirects agree on every front end; bytes that are not
        UTF-8 fall back to latin-1 (never an error)."""
        qs = self.scope.get("query_string", b"")
        try:
            return qs.decode()
        except UnicodeDecodeError:
            return qs.decode("latin-1")

    @property
    def query_string(self) -> str:
        """The raw query string (after ``?``, still percent-encoded; ``""`` when there is none)."""
        return self._raw_query()

    @property
    def query_multi(self) -> dict[str, list[str]]:
        """Every value of every query parameter (``query`` keeps only the last one)."""
        try:
            return self._query_multi
        except AttributeError:
            pass
        multi: dict[str, list[str]] = {}
        qs = self._raw_query()
        if qs:
            for k, v in parse_qsl(qs, keep_blank_values=True):
                multi.setdefault(k, []).append(v)
        self._query_multi = multi
        return multi

    def query_list(self, name: str) -> list[str]:
        """All values of a repeated query parameter (``?tag=a&tag=b`` -> ``["a", "b"]``), in order."""
        return list(self.query_multi.get(name, ()))

    @property
    def cookies(self) -> dict[str, str]:
        """The Cookie header(s) as a dict (see ``parse_cookie_header``)."""
        try:
            return self._cookies
        except AttributeError:
            pass
        raw = self.headers.getall("cookie")
        c = self._cookies = parse_cookie_header("; ".join(raw)) if raw else {}
        return c

    async def form(self, limits=None):
        """The body as a ``forms.FormData`` (urlencoded or multipart), parsed once while it streams in;
        ``limits``: a ``forms.FormLimits`` (default: the app's ``form_limits``, else the defaults)."""
        if self._form is not None:
            return self._form
        from .forms import read_form  # here, not at the top: forms.py imports this module

        form = self._form = await read_form(self, limits)
        return form

    async def close(self) -> None:
        """Release what the request holds: the form's uploaded files.  The app calls it when the
        request ends; calling it again does nothing."""
        if self._form is not None:
            await self._form.close()

    async def body(self) -> bytes:
        """The whole body: 413 over ``max_body``, 408 when it takes longer than the app's ``body_timeout``."""
        if self._body is not None:
            if self._body is STREAM_CONSUMED:
                raise RuntimeError("the request body was already read as a stream (request.form() or "
                                   "request.stream()); it is not kept")
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

    def _check_length(self, limit: int) -> int | None:
        """The declared Content-Length (None: not declared) after checking it, before reading anything:
        400 when it is malformed, 413 when it is over ``limit``."""
        cl = self.header("content-length")
        if cl is None:
            return None
        if not cl.isdigit():
            raise BadRequest("invalid Content-Length")
        declared = int(cl)
        if declared > limit:
            raise PayloadTooLarge(limit)
        return declared

    async def _read_body(self, limit: int, timeout: float | None) -> bytes:
        declared = self._check_length(limit)
        try:
            with deadline(timeout):  # None: no limit
                self._body = await self._read_all(declared, limit)
        except TimeoutError:
            raise RequestTimeout(timeout) from None
        return self._body

    async def _read_all(self, declared: int | None, limit: int) -> bytes:
        """The whole body from the server, refused with 413 as soon as it passes ``limit`` (a chunked
        upload is never all in memory first)."""
        chunks = []
        size = 0
        more = True
        while more:
            chunk, more = await self._receive_chunk()
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(limit)
                chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def stream(self):
        """The body's chunks as they arrive, none kept: 413 past ``max_body``, 408 when the whole body takes
        longer than the app's ``body_timeout``.  A body that was already read comes as one chunk; one read
        to its end by a stream cannot be read again."""
        app = self.app
        timeout = app.body_timeout if app is not None else None
        chunks = self._limited_chunks(self.max_body)
        end = None if timeout is None else monotonic() + timeout
        try:
            while True:
                try:
                    with deadline(None if end is None else max(0.0, end - monotonic())):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise RequestTimeout(timeout) from None
                yield chunk
        finally:
            await chunks.aclose()

    async def is_disconnected(self) -> bool:
        """Whether the client has closed the connection: a long handler can stop work nobody waits for.
        The first call starts a watch that the app cancels when the request ends.  On ASGI the watch
        listens on the body's channel, so a body not read yet is read first (its limits apply)."""
        watch = self._watch
        if watch is None:
            if self._body is None:
                await self.body()
            watch = self._watch = asyncio.ensure_future(self._wait_disconnected())
            await asyncio.sleep(0)  # let it look once: a client already gone is seen now
        return watch.done()

    async def _wait_disconnected(self) -> None:
        await wait_for_disconnect(self.receive)

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    async def _limited_chunks(self, limit: int):
        """The body's chunks, refused with 413 as soon as they pass ``limit`` (before a chunked upload is
        all in); the body slot then holds ``STREAM_CONSUMED``.  For ``stream`` and the form parser."""
        body = self._body
        if body is STREAM_CONSUMED:
            raise RuntimeError("the request body was already consumed as a stream")
        if body is not None:
            if len(body) > limit:
                raise PayloadTooLarge(limit)
            if body:
                yield body
            return
        self._check_length(limit)
        size = 0
        async for chunk in self._chunks():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(limit)
            yield chunk
        self._body = STREAM_CONSUMED  # read to the end: the app need not drain it

    async def _chunks(self):
        """The body's chunks as they come from the server."""
        more = True
        while more:
            chunk, more = await self._receive_chunk()
            if chunk:
                yield chunk

    async def _receive_chunk(self) -> tuple[bytes, bool]:
        """The next ASGI ``http.request`` message as (chunk, more to come)."""
        while True:
            msg = await self.receive()
            t = msg["type"]
            if t == "http.request":
                return msg.get("body", b""), msg.get("more_body", False)
            if t == "http.disconnect":
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
            raise ValidationFailed.from_msgspec(e, ["body"]) from None
        except (msgspec.DecodeError, UnicodeDecodeError) as e:  # msgspec: a string that is not UTF-8
            raise BadRequest(f"malformed JSON: {e}") from None
