"""The floor for ASGI frameworks: a raw ASGI app (a dict lookup, orjson or the precompiled Jinja2 page,
two sends), no framework, and a WebSocket echo at /ws-echo.

    uvicorn raw_asgi:app --app-dir PEERS ...     granian --interface asgi --working-dir PEERS raw_asgi:app
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import orjson  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402

TEXT = [(b"content-type", b"text/plain; charset=utf-8")]
JSON = [(b"content-type", b"application/json")]
HTML = [(b"content-type", b"text/html; charset=utf-8")]
ROUTES = {
    "/ping": (TEXT, lambda: PONG),
    "/json": (JSON, lambda: orjson.dumps(JSON_SMALL)),
    "/json-large": (JSON, lambda: orjson.dumps(JSON_LARGE)),
    "/html": (HTML, lambda: render_html().encode()),
}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            await send({"type": msg["type"] + ".complete"})
            if msg["type"] == "lifespan.shutdown":
                return
    if scope["type"] == "websocket":
        await echo(scope, receive, send)
        return
    if scope["type"] != "http":
        return
    route = ROUTES.get(scope["path"])
    if route is None:
        await send({"type": "http.response.start", "status": 404, "headers": TEXT})
        await send({"type": "http.response.body", "body": b"not found"})
        return
    headers, make = route
    body = make()
    await send({"type": "http.response.start", "status": 200,
                "headers": headers + [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


async def echo(scope, receive, send):
    """/ws-echo: every message sent back as it came (the server's WebSocket path, nothing else)."""
    await receive()  # websocket.connect
    if scope["path"] != "/ws-echo":
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.accept"})
    while True:
        msg = await receive()
        if msg["type"] != "websocket.receive":
            return
        if msg.get("text") is not None:
            await send({"type": "websocket.send", "text": msg["text"]})
        else:
            await send({"type": "websocket.send", "bytes": msg.get("bytes")})
