"""A small app with pure-ASGI middleware, for the RSGI front end's ASGI adapter (test_rsgi.py)."""
import asyncio

from aquilia_app import App, Request, Response, StreamingResponse, WebSocket
from aquilia_app.middleware import ASGIMiddleware


class Stamp(ASGIMiddleware):
    """Adds ``x-stamp`` to every response and counts the request bodies' bytes it saw go by."""

    async def __call__(self, scope, receive, send):
        seen = 0

        async def counting_receive():
            nonlocal seen
            msg = await receive()
            seen += len(msg.get("body", b""))
            return msg

        async def stamping_send(msg):
            if msg["type"] == "http.response.start":
                msg = dict(msg, headers=list(msg["headers"]) + [(b"x-stamp", self.options["name"].encode())])
            elif msg["type"] == "http.response.body" and not msg.get("more_body"):
                scope.setdefault("state", {})["seen"] = seen
            await send(msg)

        await self.app(scope, counting_receive, stamping_send)


class WSGuard(ASGIMiddleware):
    """Refuses a WebSocket without ``?token=ok`` before the app sees it (a close before accept: 403)."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and b"token=ok" not in scope.get("query_string", b""):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)


app = App(max_body_size=1000)
app.add_middleware(Stamp, priority=10, name="outer")
app.add_middleware(WSGuard, priority=20)


@app.websocket("/ws")
async def ws_echo(ws: WebSocket):
    await ws.accept()
    async for text in ws.iter_text():
        await ws.send_text(text)


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}


@app.get("/hello")
async def hello():
    return {"hello": "world"}


@app.post("/echo")
async def echo(request: Request):
    body = await request.body()
    return Response(body, 200, [("x-client-is-tuple", str(isinstance(request.scope["client"], tuple)))])


@app.get("/who")
async def who(request: Request):
    return {"method": request.method, "path": request.path, "agent": request.header("user-agent"),
            "query": request.query, "n_headers": len(request.headers)}


@app.get("/chunks")
async def chunks(delay: float = 0.0):
    async def gen():
        for i in range(3):
            if delay:
                await asyncio.sleep(delay)
            yield f"part {i}\n"

    return StreamingResponse(gen())
