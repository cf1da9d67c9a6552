"""ASGI apps mounted into an ``App`` (test_mounts.py), served on the wire with no middleware, so that RSGI
requests take the direct path: a raw ASGI app that reports what it was given, a Starlette app,
prometheus-client's ASGI app and another ``App`` - each with WebSockets where it has them."""
import hashlib

import orjson
from prometheus_client import CollectorRegistry, Counter, make_asgi_app
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket as StarletteWebSocket

from aquilia_app import App, Request, WebSocket

MAX_BODY = 1024  # the mounting app's body limit: a mounted app reads the body itself, without it


async def report(scope, receive, send):
    """Reads the whole body and answers 201 with what it saw (a digest of the body, not the body); a
    WebSocket: ``report_socket``."""
    if scope["type"] == "websocket":
        return await report_socket(scope, receive, send)
    body, more = b"", True
    while more:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return
        body += msg.get("body", b"")
        more = msg.get("more_body", False)
    seen = {"method": scope["method"], "path": scope["path"], "root_path": scope["root_path"],
            "query": scope["query_string"].decode(), "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    await send({"type": "http.response.start", "status": 201,
                "headers": [(b"content-type", b"application/json"), (b"x-mounted", b"report")]})
    await send({"type": "http.response.body", "body": orjson.dumps(seen)})


async def report_socket(scope, receive, send):
    """Accepts (with the client's first subprotocol), sends what it was given as JSON, then echoes every
    message, text or binary, until the client closes; a ``?refuse=STATUS`` query refuses the handshake
    with that status (an HTTP response where the server can send one)."""
    assert (await receive())["type"] == "websocket.connect"
    query = scope["query_string"].decode()
    if query.startswith("refuse="):
        await send({"type": "websocket.close", "code": int(query[7:])})
        return
    offered = scope.get("subprotocols") or []
    await send({"type": "websocket.accept", "subprotocol": offered[0] if offered else None})
    seen = {"path": scope["path"], "root_path": scope["root_path"], "query": query, "subprotocols": offered}
    await send({"type": "websocket.send", "text": orjson.dumps(seen).decode()})
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            return
        await send({"type": "websocket.send", **{k: msg[k] for k in ("text", "bytes") if msg.get(k) is not None}})


async def starlette_echo(ws: StarletteWebSocket):
    if ws.query_params.get("deny"):
        await ws.close()
        return
    await ws.accept()
    async for text in ws.iter_text():
        await ws.send_json({"echo": text, "root_path": ws.scope["root_path"],
                            "hello_url": str(ws.url_for("hello", name="x"))})


async def hello(request: StarletteRequest):
    return JSONResponse({"hello": request.path_params["name"]})


async def where(request: StarletteRequest):
    return JSONResponse({"path": request.url.path, "root_path": request.scope["root_path"],
                         "hello_url": str(request.url_for("hello", name="x"))})


starlette_app = Starlette(routes=[Route("/hello/{name}", hello, name="hello"), Route("/where", where),
                                  WebSocketRoute("/echo", starlette_echo)])

registry = CollectorRegistry()
hits = Counter("mounted_hits", "requests the mounting app counted", registry=registry)

inner = App()


@inner.get("/items/{id:int}", name="item")
async def item(request: Request, id: int):
    return {"id": id, "url": request.url, "route_path": request.route_path, "self": request.url_for("item", id=id)}


@inner.websocket("/ws/{n:int}")
async def inner_socket(ws: WebSocket, n: int):
    await ws.accept()
    await ws.send_json({"n": n, "route_path": ws.route_path, "message": await ws.receive_text()})


app = App(max_body_size=MAX_BODY)


@app.get("/healthz")
async def healthz():
    hits.inc()
    return {"status": "ok"}


app.mount("/report", report)
app.mount("/star", starlette_app)
app.mount("/prom", make_asgi_app(registry))
app.mount("/inner", inner)
