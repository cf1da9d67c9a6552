"""Litestar peer (run on uvicorn with uvloop + httptools), its own way: typed handlers, msgspec encoding.

/items: a msgspec Struct (Litestar decodes and validates it; unknown fields forbidden) and aiosqlite, the
connection opened at start-up into the app state.  /page: Litestar's client-side cookie sessions
(``CookieBackendConfig``: the session AES-GCM encrypted and authenticated, which needs ``cryptography``) and
its CompressionMiddleware (the class its ``compression_config`` installs), both as that handler's own
middleware; CORS through ``cors_config``, Litestar's only way: app-wide (without an Origin header it returns at
once).  /ws-echo: a ``websocket_listener`` that returns what it receives."""
import os
import sys
from typing import Annotated

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import msgspec  # noqa: E402
from litestar import Litestar, MediaType, Request, Response, get, post, websocket_listener  # noqa: E402
from litestar.config.compression import CompressionConfig  # noqa: E402
from litestar.config.cors import CORSConfig  # noqa: E402
from litestar.datastructures import State  # noqa: E402
from litestar.middleware import DefineMiddleware  # noqa: E402
from litestar.middleware.compression import CompressionMiddleware  # noqa: E402
from litestar.middleware.session.client_side import CookieBackendConfig  # noqa: E402
from litestar.response import Stream  # noqa: E402

import payloads as p  # noqa: E402
from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402


class ItemIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=p.ITEM_NAME_MAX)]
    price: Annotated[float, msgspec.Meta(ge=0, le=p.ITEM_PRICE_MAX)]
    tags: Annotated[list[Annotated[str, msgspec.Meta(max_length=p.ITEM_TAG_MAX)]],
                    msgspec.Meta(max_length=p.ITEM_TAGS_MAX)] = []


@get("/ping", media_type=MediaType.TEXT)
async def ping() -> bytes:
    return PONG


@get("/json")
async def json_small() -> dict:
    return JSON_SMALL


@get("/json-large")
async def json_large() -> list:
    return JSON_LARGE


@get("/html", media_type=MediaType.HTML)
async def html() -> str:
    return render_html()


@get("/stream", media_type=MediaType.TEXT)
async def stream() -> Stream:
    return Stream(p.stream_chunks(), media_type=MediaType.TEXT)


@post("/items", status_code=201)
async def create_item(data: ItemIn, state: State) -> Response[dict]:
    stored = await p.store_item(state.db, data.name, data.price, data.tags)
    return Response(stored, status_code=201, headers={"location": f"/items/{stored['id']}"})


SESSIONS = CookieBackendConfig(secret=p.SESSION_SECRET.encode(), key=p.SESSION_COOKIE, max_age=p.SESSION_MAX_AGE)
GZIP = CompressionConfig(backend="gzip", minimum_size=p.GZIP_MIN_SIZE, gzip_compress_level=p.GZIP_LEVEL)


@get("/page", media_type=MediaType.HTML,
     middleware=[DefineMiddleware(CompressionMiddleware, config=GZIP), SESSIONS.middleware])
async def page(request: Request) -> str:
    visits = request.session.get("visits", 0) + 1
    request.session["visits"] = visits
    return p.render_page(visits)


@websocket_listener("/ws-echo")
async def ws_echo(data: str) -> str:
    return data


async def open_db(app: Litestar) -> None:
    app.state.db = await p.open_items_db(p.items_db_path())


async def close_db(app: Litestar) -> None:
    await p.close_items_db(app.state.db)


app = Litestar(
    route_handlers=[ping, json_small, json_large, html, stream, create_item, page, ws_echo],
    cors_config=CORSConfig(allow_origins=[p.CORS_ORIGIN], allow_credentials=True),
    on_startup=[open_db], on_shutdown=[close_db],
    openapi_config=None,
)
