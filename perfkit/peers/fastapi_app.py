"""FastAPI peer (run on uvicorn with uvloop + httptools): the default JSON response class, as users get it.

/items: a pydantic model (unknown fields forbidden) and aiosqlite, the connection opened in the lifespan and
handed to the route by a dependency.  /page: Starlette's CORSMiddleware, SessionMiddleware (itsdangerous-
signed cookie) and GZipMiddleware, on that route only (a Starlette route's own middleware: FastAPI has no
per-route middleware, and app-wide ones would tax every other route).  /ws-echo: FastAPI's WebSocket
(uvicorn's ``websockets`` implementation)."""
import os
import sys
from contextlib import asynccontextmanager
from typing import Annotated

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aiosqlite  # noqa: E402
from fastapi import Depends, FastAPI, Request, Response, WebSocket, WebSocketDisconnect  # noqa: E402
from fastapi.middleware.cors import CORSMiddleware  # noqa: E402
from fastapi.responses import HTMLResponse, PlainTextResponse, StreamingResponse  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.middleware.gzip import GZipMiddleware  # noqa: E402
from starlette.middleware.sessions import SessionMiddleware  # noqa: E402
from starlette.routing import Route  # noqa: E402

import payloads as p  # noqa: E402
from item_model import ItemIn  # noqa: E402
from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.db = await p.open_items_db(p.items_db_path())
    try:
        yield
    finally:
        await p.close_items_db(app.state.db)


def get_db(request: Request) -> aiosqlite.Connection:
    return request.app.state.db


app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan)


@app.get("/ping")
async def ping():
    return PlainTextResponse(PONG)


@app.get("/json")
async def json_small():
    return JSON_SMALL


@app.get("/json-large")
async def json_large():
    return JSON_LARGE


@app.get("/html", response_class=HTMLResponse)
async def page():
    return render_html()


@app.get("/stream")
async def stream():
    return StreamingResponse(p.stream_chunks(), media_type="text/plain")


@app.post("/items", status_code=201)
async def create_item(item: ItemIn, db: Annotated[aiosqlite.Connection, Depends(get_db)], response: Response):
    stored = await p.store_item(db, item.name, item.price, item.tags)
    response.headers["location"] = f"/items/{stored['id']}"
    return stored


async def visit_page(request: Request) -> HTMLResponse:
    visits = request.session.get("visits", 0) + 1
    request.session["visits"] = visits
    return HTMLResponse(p.render_page(visits))


# OPTIONS too: CORSMiddleware answers the preflights (a route refuses other methods before its middleware)
app.router.routes.append(Route("/page", visit_page, methods=["GET", "OPTIONS"], middleware=[
    Middleware(CORSMiddleware, allow_origins=[p.CORS_ORIGIN], allow_credentials=True),
    Middleware(GZipMiddleware, minimum_size=p.GZIP_MIN_SIZE, compresslevel=p.GZIP_LEVEL),
    Middleware(SessionMiddleware, secret_key=p.SESSION_SECRET, session_cookie=p.SESSION_COOKIE,
               max_age=p.SESSION_MAX_AGE),
]))


@app.websocket("/ws-echo")
async def ws_echo(websocket: WebSocket):
    await websocket.accept()
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        pass
