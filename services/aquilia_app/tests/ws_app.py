"""The WebSocket test app: test_websockets.py serves ``app`` with granian (RSGI and ASGI) and
uvicorn, test_testclient.py drives a fresh ``build()`` per test in-process.  What happens on the
server side is recorded in ``EVENTS`` (per connection ``tag``) and read back over HTTP
(``GET /events/{tag}``), since the real servers run it in another process."""
import asyncio
import itertools
from collections import defaultdict
from typing import Annotated

from aquilia_app import REQUEST, App, Container, HTTPException, StreamingResponse
from aquilia_app.controllers import Cookie, Header
from aquilia_app.websockets import WebSocket, WebSocketDisconnect

EVENTS: dict[str, list[str]] = defaultdict(list)
STARTED: list[str] = []  # the lifespan hooks that ran, in order
SMALL_LIMIT = 1024  # bytes: /ws/small's max_message
_ids = itertools.count(1)


class Session:
    """A request-scoped dependency whose teardown the tests watch for."""

    def __init__(self):
        self.tag = ""
        self.id = next(_ids)


async def open_session():
    s = Session()
    yield s
    EVENTS[s.tag].append("session closed")


def build() -> App:
    """A new app (an App starts and stops once: each in-process test takes its own)."""
    container = Container()
    container.register(Session, open_session, scope=REQUEST)
    app = App(container=container)
    app.on_startup(lambda: STARTED.append("startup"))
    app.on_shutdown(lambda: STARTED.append("shutdown"))
    app.get("/healthz")(healthz)
    app.get("/events/{tag}")(events)
    app.get("/stream")(stream)
    for path, handler in WS_ROUTES.items():
        app.websocket(path)(handler)
    return app


async def healthz():
    return {"status": "ok"}


async def events(tag: str):
    return EVENTS.get(tag, [])


async def stream(tag: str = "", n: int = 0):
    """``n`` chunks, or an endless stream when 0; each chunk 20 ms after the previous one."""
    async def gen():
        try:
            for i in itertools.count():
                if n and i >= n:
                    return
                yield f"chunk {i}\n"
                await asyncio.sleep(0.02)
        finally:
            EVENTS[tag].append("stream end")

    return StreamingResponse(gen())


async def echo_text(ws: WebSocket):
    await ws.accept(ws.subprotocols[0] if ws.subprotocols else None, headers={"x-ws": "yes"})
    async for text in ws.iter_text():
        await ws.send_text(text)


async def echo_bytes(ws: WebSocket):
    await ws.accept()
    async for data in ws.iter_bytes():
        await ws.send_bytes(data)


async def echo_json(ws: WebSocket):
    await ws.accept()
    async for obj in ws.iter_json():
        await ws.send_json({"got": obj})


async def room(ws: WebSocket, room: int, session: Session, tag: str, name: str = "anon",
               token: Annotated[str | None, Header(alias="x-token")] = None,
               flavor: Annotated[str | None, Cookie()] = None):
    session.tag = tag
    EVENTS[tag].append("handler start")
    await ws.accept()
    await ws.send_json({"room": room, "name": name, "session": session.id, "token": token, "flavor": flavor})
    try:
        async for text in ws.iter_text():
            await ws.send_text(f"{name}@{room}: {text}")
    finally:
        EVENTS[tag].append("handler end")


async def small(ws: WebSocket, tag: str):
    ws.max_message = SMALL_LIMIT
    await ws.accept()
    try:
        async for data in ws.iter_bytes():
            await ws.send_bytes(data)
    finally:
        EVENTS[tag].append("small end")


async def boom(ws: WebSocket, tag: str):
    await ws.accept()
    await ws.receive_text()
    EVENTS[tag].append("raising")
    raise RuntimeError("the handler failed")


async def boom_early(ws: WebSocket):
    raise RuntimeError("failed before accepting")


async def private(ws: WebSocket, token: Annotated[str | None, Header(alias="x-token")] = None):
    if token != "secret":
        raise HTTPException(401, "a valid x-token header is required")
    await ws.accept()
    await ws.send_text("welcome")


async def policy(ws: WebSocket):
    """An HTTPException below 500 after accept(): close 1008 with its detail."""
    await ws.accept()
    await ws.receive_text()
    raise HTTPException(403, "not allowed in this room")


async def refuse(ws: WebSocket):
    await ws.close()


async def leave(ws: WebSocket):
    await ws.accept()
    await ws.send_text("bye")


async def push(ws: WebSocket, tag: str):
    """Sends a counter every 10 ms and never reads: it must still learn that the client left."""
    await ws.accept()
    n = 0
    try:
        while True:
            await ws.send_text(str(n))
            n += 1
            await asyncio.sleep(0.01)
    finally:
        EVENTS[tag].append("push end")


async def chat(ws: WebSocket, tag: str):
    """A receiving task and a pushing task on one socket, as a chat room has: both end when the client
    leaves, the receiver from its receive loop and the pusher at its next send."""
    await ws.accept()

    async def ticks():
        try:
            while True:
                await ws.send_text("tick")
                await asyncio.sleep(0.01)
        except WebSocketDisconnect:
            EVENTS[tag].append("pusher end")

    pusher = asyncio.create_task(ticks())
    try:
        async for text in ws.iter_text():
            await ws.send_text(f"echo {text}")
    finally:
        EVENTS[tag].append("receiver end")
        await pusher


async def burst(ws: WebSocket):
    """Three sends in a row (the socket switches to its reader task), then an echo."""
    await ws.accept()
    for i in range(3):
        await ws.send_text(f"hello {i}")
    async for text in ws.iter_text():
        await ws.send_text(text)


WS_ROUTES = {
    "/ws/text": echo_text, "/ws/bytes": echo_bytes, "/ws/json": echo_json, "/ws/rooms/{room:int}": room,
    "/ws/small": small, "/ws/boom": boom, "/ws/boom-early": boom_early, "/ws/private": private,
    "/ws/policy": policy, "/ws/refuse": refuse, "/ws/leave": leave, "/ws/push": push, "/ws/chat": chat,
    "/ws/burst": burst,
}

app = build()
asgi = app.asgi()
