"""BlackSheep peer (run on uvicorn with uvloop + httptools).

/items: a pydantic model bound by ``FromJSON`` (BlackSheep validates it; unknown fields forbidden) and
aiosqlite, the connection opened in the app's lifespan and injected by type (BlackSheep's DI).  /page:
BlackSheep's SessionMiddleware with its CookieSessionStore (itsdangerous-signed cookie) and its
GzipMiddleware, chained around that handler alone with BlackSheep's own ``get_middlewares_chain`` (what the
app does with app-wide middleware at start-up), so the other routes do not pass through them; CORS with
``use_cors``, BlackSheep's only way: app-wide (without an Origin header it returns at once).
/ws-echo: BlackSheep's WebSocket."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aiosqlite  # noqa: E402
from blacksheep import Application, FromJSON, Request, Response, StreamedContent, html, json, text  # noqa: E402
from blacksheep.middlewares import get_middlewares_chain  # noqa: E402
from blacksheep.server.compression import GzipMiddleware  # noqa: E402
from blacksheep.server.websocket import WebSocket, WebSocketDisconnectError  # noqa: E402
from blacksheep.sessions import SessionMiddleware  # noqa: E402
from blacksheep.sessions.cookies import CookieSessionStore  # noqa: E402

import payloads as p  # noqa: E402
from item_model import ItemIn  # noqa: E402
from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402


app = Application()
app.use_cors(allow_origins=p.CORS_ORIGIN, allow_credentials=True, allow_methods="GET POST")


@app.lifespan
async def items_db():
    db = await p.open_items_db(p.items_db_path())
    app.services.register(aiosqlite.Connection, instance=db)
    try:
        yield
    finally:
        await p.close_items_db(db)


@app.router.get("/ping")
async def ping():
    return text(PONG.decode())


@app.router.get("/json")
async def json_small():
    return json(JSON_SMALL)


@app.router.get("/json-large")
async def json_large():
    return json(JSON_LARGE)


@app.router.get("/html")
async def page():
    return html(render_html())


@app.router.get("/stream")
async def stream():
    return Response(200, content=StreamedContent(b"text/plain; charset=utf-8", p.stream_chunks))


@app.router.post("/items")
async def create_item(data: FromJSON[ItemIn], db: aiosqlite.Connection):
    item = data.value
    stored = await p.store_item(db, item.name, item.price, item.tags)
    response = json(stored, status=201)
    response.add_header(b"location", f"/items/{stored['id']}".encode())
    return response


async def visit_page(request: Request) -> Response:
    visits = request.session.get("visits", 0) + 1
    request.session["visits"] = visits
    return html(p.render_page(visits))


app.router.add_get("/page", get_middlewares_chain([
    GzipMiddleware(min_size=p.GZIP_MIN_SIZE, comp_level=p.GZIP_LEVEL),
    SessionMiddleware(CookieSessionStore(p.SESSION_SECRET, session_cookie=p.SESSION_COOKIE,
                                         session_max_age=p.SESSION_MAX_AGE)),
], visit_page))


@app.router.ws("/ws-echo")
async def ws_echo(websocket: WebSocket):
    await websocket.accept()
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnectError:
        pass
