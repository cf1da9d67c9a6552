"""The floor for RSGI: a raw RSGI app on granian (a dict lookup, orjson or the precompiled Jinja2 page,
one ``response_bytes`` call), no framework, and a WebSocket echo at /ws-echo.  aquilia_app is served through RSGI by default, so this is
its floor on the same server and interface; ``raw_asgi.py`` is the floor the ASGI frameworks share.

    granian --interface rsgi --working-dir PEERS raw_rsgi:app
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import orjson  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402

TEXT = [("content-type", "text/plain; charset=utf-8")]
JSON = [("content-type", "application/json")]
HTML = [("content-type", "text/html; charset=utf-8")]
ROUTES = {
    "/ping": (TEXT, lambda: PONG),
    "/json": (JSON, lambda: orjson.dumps(JSON_SMALL)),
    "/json-large": (JSON, lambda: orjson.dumps(JSON_LARGE)),
    "/html": (HTML, lambda: render_html().encode()),
}


async def app(scope, proto):
    if scope.proto == "ws":
        await echo(scope, proto)
        return
    route = ROUTES.get(scope.path)
    if route is None:
        proto.response_bytes(404, TEXT, b"not found")
        return
    headers, make = route
    proto.response_bytes(200, headers, make())


async def echo(scope, proto):
    """/ws-echo: every message sent back as it came (granian's own WebSocket path, nothing else)."""
    if scope.path != "/ws-echo":
        proto.close(404)
        return
    transport = await proto.accept()
    while True:
        msg = await transport.receive()
        if msg.kind == 2:
            await transport.send_str(msg.data)
        elif msg.kind == 1:
            await transport.send_bytes(msg.data)
        else:  # the client closed
            break
    proto.close(1000)
