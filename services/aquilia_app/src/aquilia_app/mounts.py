"""ASGI applications mounted under a path prefix (``App.mount(prefix, asgi_app)``), as Starlette's
``Mount``: a Starlette or FastAPI app, prometheus-client's ``make_asgi_app()``, another ``App``.

The mounted app sees the request's scope with ``root_path`` extended by the prefix and ``path`` left
whole (the ASGI spec as Starlette and hypercorn read it; an ``App`` routes on the path less its root).
It reads the body itself and sends its own response, on either front end: under RSGI through the
RSGI→ASGI adapter (``rsgi.serve_asgi``).  Native middleware still runs around it: headers it adds to
the response (CORS, a session cookie, a request id) are appended to the mounted app's own.

WebSockets under the prefix go to the mounted app too (``WebSocketBridge``: its ASGI ``receive`` and
``send`` over the framework's ``WebSocket``, websockets.py, so both front ends and the WebSocket lifecycle - limits,
the close after a failure, teardown - are the framework's own).  Lifespan events are not passed on (as
with Starlette's ``Mount``, the lifespan of a mounted app is the mounting app's to run, e.g. from
``App(lifespan=...)``)."""
from __future__ import annotations

import inspect
import logging

from .responses import PerRequestResponse, problem
from .rsgi import serve_asgi

__all__ = ["MountedApp", "is_asgi_app"]

log = logging.getLogger("aquilia_app")


def is_asgi_app(target) -> bool:
    """True for ``app(scope, receive, send)``, False for a mount handler ``handler(request, path)``;
    anything else is refused."""
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        raise TypeError(f"mount takes an ASGI app or a handler(request, path), not {target!r}") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    if len(positional) == 3:
        return True
    if len(positional) == 2:
        return False
    raise TypeError(f"mount takes an ASGI app (scope, receive, send) or a handler (request, path); "
                    f"{target!r} takes {len(positional)} arguments")


class MountedApp(PerRequestResponse):
    """One request handed to a mounted ASGI app.  ``status`` is the app's, once it started its
    response (for the request metrics); an app that fails or returns before that gives a 500."""

    __slots__ = ("app", "request", "root", "started")

    def __init__(self, app, request, root: str):
        self.app = app
        self.request = request
        self.root = root  # the mounting app's root path + the prefix
        self.status = 500
        self.raw_headers = []  # what native middleware added
        self.started = False

    def _child_scope(self, scope: dict) -> dict:
        child = dict(scope)
        child["root_path"] = self.root
        return child

    def _send_through(self, send):
        async def send_with_headers(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                self.status = msg["status"]
                self.started = True
                if self.raw_headers:
                    msg = {**msg, "headers": [*msg.get("headers", ()), *self.raw_headers]}
            await send(msg)

        return send_with_headers

    def _body_read(self) -> bytes | None:
        """The body, when the framework already read it (a middleware asked for it); else None."""
        body = self.request._body
        return None if body is None else bytes(body)  # STREAM_CONSUMED: read to its end, nothing kept

    async def _run(self, scope: dict, receive, send) -> None:
        send = self._send_through(send)
        try:
            await self.app(self._child_scope(scope), receive, send)
        except Exception:
            if self.started:
                raise  # the front end logs it; the response is cut short
            log.exception("mounted app %r failed", self.app)
        if not self.started:
            await problem(500, "Internal Server Error", "the mounted application sent no response")(scope, receive,
                                                                                                   send)
            self.status = 500

    async def __call__(self, scope, receive, send) -> None:
        body = self._body_read()
        if body is not None:  # the app gets it first, then the server's channel (the client leaving)
            pending = [{"type": "http.request", "body": body, "more_body": False}]
            server_receive = receive

            async def receive():
                return pending.pop() if pending else await server_receive()

        await self._run(scope, receive, send)

    async def send_rsgi(self, proto) -> None:
        await serve_asgi(self._run, self.request.scope, proto, self._body_read())
