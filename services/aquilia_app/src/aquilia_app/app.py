"""The reference app.  ``python -m aquilia_app`` serves it; the server imports ``aquilia_app.app:app``.

Configuration comes from the environment so every worker process builds the same app:
``AQUILIA_APP_DB`` (SQLite file; default: a file in the temp dir), ``AQUILIA_APP_METRICS`` (``0`` turns
instrumentation off), ``AQUILIA_APP_MAX_BODY`` (bytes, default 1 MiB), ``AQUILIA_APP_POOL`` (SQLite
connections per worker, default 4), ``AQUILIA_APP_POOL_TIMEOUT`` (seconds a request waits for a free
connection before a 503, default 5), ``AQUILIA_APP_BODY_TIMEOUT`` (seconds to receive a whole request
body before a 408, default 30; 0 turns the limit off), ``AQUILIA_APP_SECRET_KEY`` (signs the /page
session cookie; unset: a random key per process, so sessions do not survive a restart or span
workers), ``AQUILIA_APP_ENV`` (``production`` turns the OpenAPI document and docs page off).
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import tempfile
from typing import Annotated, AsyncIterator

import msgspec
import orjson

from .application import DEFAULT_BODY_TIMEOUT, App
from .compression import CompressionMiddleware
from .cors import CORSMiddleware
from .controllers import Controller, delete, get, post, put
from .db import DEFAULT_ACQUIRE_TIMEOUT, Connection, SQLitePool
from .di import REQUEST, SINGLETON, Container
from .exceptions import BadRequest, NotFound
from .metrics import Metrics, metrics_response
from .query import Q, insert_sql
from .requests import Request
from .responses import CT_JSON, CT_TEXT, Response, StreamingResponse
from .routing import encode_path
from .sessions import SessionMiddleware
from .templates import Templates
from .websockets import WebSocket

HERE = os.path.dirname(os.path.abspath(__file__))

# -- fixed payloads (the bench peers serve byte-identical ones) ---------------------------------
JSON_SMALL = {
    "message": "Hello, World!",
    "service": "aquilia_app",
    "version": 1,
    "ok": True,
    "ratio": 0.75,
    "tags": ["fast", "async", "typed", "asgi"],
    "numbers": [1, 2, 3, 4, 5, 6, 7, 8],
    "nested": {"id": 42, "name": "answer", "active": False, "score": 99.5},
}
JSON_LARGE = [{"id": i, "name": f"item-{i}", "value": (i % 10) * 0.5} for i in range(1000)]
HTML_ROWS = [{"id": i, "message": m} for i, m in enumerate(
    ["fortune favours the bold", "<script>alert('escaped')</script>", "a penny saved", "měřeno, ne odhadnuto",
     "keep it simple", "measure twice", "cut once", "premature optimization", "the map is not the territory",
     "less is more", "make it work, make it right, make it fast", "ship it"], start=1)]
STREAM_CHUNK = b"x" * 1023 + b"\n"
SQLITE_MAX_INT = (1 << 63) - 1  # SQLite's largest integer: a bigger id or offset cannot even be bound (OverflowError)
STREAM_CHUNKS = 10


class Settings(msgspec.Struct, frozen=True):
    db_path: str
    pool_size: int = 4
    pool_timeout: float = DEFAULT_ACQUIRE_TIMEOUT


class ItemIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    price: Annotated[float, msgspec.Meta(ge=0, le=1e9)]
    tags: Annotated[list[Annotated[str, msgspec.Meta(max_length=32)]], msgspec.Meta(max_length=16)] = []


class ItemRepository:
    """Items in SQLite, through the query builder (parameterized SQL only)."""

    TABLE = "items"

    def __init__(self, conn: Connection):
        self.conn = conn

    @staticmethod
    def _row(r: dict) -> dict:
        r["tags"] = orjson.loads(r["tags"])
        return r

    async def list(self, q: Q) -> list[dict]:
        sql, params = q.sql()
        return [self._row(r) for r in await self.conn.fetchall(sql, params)]

    async def count(self, q: Q) -> int:
        sql, params = q.count_sql()
        row = await self.conn.fetchone(sql, params)
        return next(iter(row.values()))

    async def get(self, item_id: int) -> dict | None:
        if item_id > SQLITE_MAX_INT:  # no such row (and sqlite3 refuses to bind it)
            return None
        sql, params = Q(self.TABLE).filter(id=item_id).sql()
        r = await self.conn.fetchone(sql, params)
        return None if r is None else self._row(r)

    INSERT = insert_sql(TABLE, dict.fromkeys(("name", "price", "tags")))[0]  # the statement, built once

    async def create(self, item: ItemIn) -> dict:
        _, rowid = await self.conn.execute(self.INSERT, (item.name, item.price, orjson.dumps(item.tags).decode()))
        return {"id": rowid, "name": item.name, "price": item.price, "tags": item.tags}

    async def replace(self, item_id: int, item: ItemIn) -> bool:
        if item_id > SQLITE_MAX_INT:
            return False
        sql, params = Q(self.TABLE).filter(id=item_id).update_sql(
            name=item.name, price=item.price, tags=orjson.dumps(item.tags).decode())
        n, _ = await self.conn.execute(sql, params)
        return n > 0

    async def delete(self, item_id: int) -> bool:
        if item_id > SQLITE_MAX_INT:
            return False
        sql, params = Q(self.TABLE).filter(id=item_id).delete_sql()
        n, _ = await self.conn.execute(sql, params)
        return n > 0


from .app_schema import SCHEMA  # noqa: E402  (its own module: the server imports it without building the app)


async def database(settings: Settings) -> AsyncIterator[SQLitePool]:
    pool = await SQLitePool(settings.db_path, settings.pool_size, settings.pool_timeout).open()
    try:
        await pool.run("executescript", SCHEMA)  # a no-op when the server prepared the file already
        yield pool
    finally:
        await pool.close()


async def connection(pool: SQLitePool) -> AsyncIterator[Connection]:
    conn = await pool.acquire()
    try:
        yield conn
    finally:
        pool.release(conn)


class ItemsController(Controller):
    prefix = "/items"

    def __init__(self, repo: ItemRepository):
        self.repo = repo

    @get("")
    async def index(self, limit: int = 20, offset: int = 0, min_price: float | None = None,
                    max_price: float | None = None, name: str | None = None):
        if not 1 <= limit <= 100:
            raise BadRequest("limit must be between 1 and 100")
        if not 0 <= offset <= SQLITE_MAX_INT:
            raise BadRequest(f"offset must be between 0 and {SQLITE_MAX_INT}")
        q = Q(ItemRepository.TABLE)
        if min_price is not None:
            q = q.filter(price__gte=min_price)
        if max_price is not None:
            q = q.filter(price__lte=max_price)
        if name:
            q = q.filter(name__contains=name)
        total = await self.repo.count(q)
        items = await self.repo.list(q.order("id").limit(limit).offset(offset))
        return {"items": items, "total": total, "limit": limit, "offset": offset}

    @post("", status=201)
    async def create(self, body: ItemIn, request: Request):
        item = await self.repo.create(body)
        return Response.json(item, 201, [("location", item_location(request, item["id"]))])

    @get("/{id:int|min=1}", name="item")
    async def read(self, id: int):
        item = await self.repo.get(id)
        if item is None:
            raise NotFound(f"item {id} does not exist")
        return item

    @put("/{id:int|min=1}")
    async def replace(self, id: int, body: ItemIn):
        if not await self.repo.replace(id, body):
            raise NotFound(f"item {id} does not exist")
        return {"id": id, "name": body.name, "price": body.price, "tags": body.tags}

    @delete("/{id:int|min=1}")
    async def remove(self, id: int):
        if not await self.repo.delete(id):
            raise NotFound(f"item {id} does not exist")
        return Response(b"", 204)


def request_app(request: Request) -> App:
    return request.app


def item_location(request: Request, item_id: int) -> str:
    """``/items/{id}``, behind the root path the app is served under (``--root-path``), as its other URLs."""
    path = request_app(request).url_for("item", id=item_id)
    root = request.root_path  # "" through RSGI, which has no root path
    return encode_path(root) + path if root else path


def _env_number(name: str, default, kind=int):
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SystemExit(f"{name} must be {'an integer' if kind is int else 'a number'}, got {raw!r}") from None


def _settings(db_path: str, pool_size: int | None, pool_timeout: float | None) -> Settings:
    size = pool_size or _env_number("AQUILIA_APP_POOL", 4)
    timeout = pool_timeout or _env_number("AQUILIA_APP_POOL_TIMEOUT", DEFAULT_ACQUIRE_TIMEOUT, float)
    if size < 1 or not timeout > 0:
        raise SystemExit("AQUILIA_APP_POOL must be >= 1 and AQUILIA_APP_POOL_TIMEOUT > 0")
    return Settings(db_path, size, timeout)


PAGE_ORIGIN = "https://app.example"  # the origin the /page workload's browser runs on


def _secret_key() -> str:
    key = os.environ.get("AQUILIA_APP_SECRET_KEY")
    if not key:
        logging.getLogger("aquilia_app").warning(
            "AQUILIA_APP_SECRET_KEY is not set: /page sessions are signed with a random per-process key")
        key = secrets.token_hex(32)
    return key


def page_middleware() -> list:
    """What a real page route runs through: CORS for the front end's origin (with credentials), the
    signed-cookie session, gzip/br/zstd above 500 bytes.  On /page only: the other routes stay plain."""
    return [CORSMiddleware(allow_origins=[PAGE_ORIGIN], allow_credentials=True),
            SessionMiddleware(_secret_key()),
            CompressionMiddleware(minimum_size=500, gzip_level=6)]


def create_app(db_path: str | None = None, *, metrics: bool | None = None, max_body: int | None = None,
               pool_size: int | None = None, pool_timeout: float | None = None,
               body_timeout: float | None = None) -> App:
    if db_path is None:
        db_path = os.environ.get("AQUILIA_APP_DB") or os.path.join(tempfile.gettempdir(), "aquilia_app.sqlite3")
    if metrics is None:
        metrics = os.environ.get("AQUILIA_APP_METRICS", "1") != "0"
    if body_timeout is None:
        body_timeout = _env_number("AQUILIA_APP_BODY_TIMEOUT", DEFAULT_BODY_TIMEOUT, float)
        if not 0 <= body_timeout < float("inf"):  # what --body-timeout accepts (nan fails both tests)
            raise SystemExit(f"AQUILIA_APP_BODY_TIMEOUT must be a number of seconds >= 0, got {body_timeout!r}")
    if max_body is None:
        max_body = _env_number("AQUILIA_APP_MAX_BODY", 1 << 20)
        if max_body < 0:
            raise SystemExit(f"AQUILIA_APP_MAX_BODY must be >= 0, got {max_body}")
    container = Container()
    container.value(Settings, _settings(db_path, pool_size, pool_timeout))
    container.register(SQLitePool, database, scope=SINGLETON)
    container.register(Connection, connection, scope=REQUEST)
    container.register(ItemRepository, scope=REQUEST)

    m = Metrics("aquilia_app") if metrics else None
    app = App(container=container, metrics=m, body_timeout=body_timeout,
              max_body_size=max_body)
    templates = Templates(os.path.join(HERE, "html"))

    @app.get("/ping")
    async def ping():
        return Response(b"pong", 200, None, CT_TEXT)

    @app.get("/json")
    async def json_small():
        return JSON_SMALL

    @app.get("/json-large")
    async def json_large():
        return JSON_LARGE

    @app.get("/html")
    async def html():
        return templates.response("page.html", title="aquilia_app", service="aquilia_app", rows=HTML_ROWS)

    @app.get("/page", middleware=page_middleware())
    async def page(request: Request):
        """A realistic page: the visitor's session (a signed cookie) counts visits; CORS; compressed."""
        visits = request.session.get("visits", 0) + 1
        request.session["visits"] = visits
        return templates.response("page.html", title="aquilia_app", service=f"aquilia_app (visit {visits})",
                                  rows=HTML_ROWS)

    @app.websocket("/ws-echo")
    async def ws_echo(ws: WebSocket):
        """Every text message sent back as it came."""
        await ws.accept()
        async for text in ws.iter_text():
            await ws.send_text(text)

    @app.get("/stream")
    async def stream(delay: float = 0.0):
        if not 0.0 <= delay <= 1000.0:
            raise BadRequest("delay must be between 0 and 1000 milliseconds")

        async def chunks():
            for _ in range(STREAM_CHUNKS):
                if delay:
                    await asyncio.sleep(delay / 1000.0)
                yield STREAM_CHUNK

        return StreamingResponse(chunks(), media_type=CT_TEXT)

    @app.get("/healthz")
    async def healthz():
        return Response(b'{"status":"ok"}', 200, None, CT_JSON)

    if m is not None:
        @app.get("/metrics")
        async def metrics_endpoint(request: Request):
            return metrics_response(m, request.header("accept"))

    app.controller(ItemsController)
    if os.environ.get("AQUILIA_APP_ENV", "development") != "production":
        app.enable_openapi(title="aquilia_app reference app", version="1.0.0")

    return app


app = create_app()
asgi = app.asgi()  # what the server runs: the compiled chain
