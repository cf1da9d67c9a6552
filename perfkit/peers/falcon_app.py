"""Falcon peer: its ASGI app (``falcon.asgi.App``), run on uvicorn with uvloop + httptools.

Resources with ``on_get``/``on_post`` responders.  JSON goes through Falcon's own media handler (the stdlib
json it uses by default, compact separators: the payloads must be byte-identical to aquilia_app's).
/items: a pydantic model (unknown fields forbidden) on ``await req.get_media()``, aiosqlite opened by a
component's ``process_startup`` (Falcon's ASGI lifespan hook).  /page: Falcon has CORS built in
(``CORSMiddleware``, app-wide, its only way; without an Origin header it does nothing) but no sessions or
compression, so those are written by hand as Falcon's users do, as hooks of the /page resource alone: the
signed-cookie session (itsdangerous) in a ``before`` and an ``after`` hook, gzip in an ``after`` hook.
/ws-echo: Falcon's ASGI WebSocket responder."""
import functools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import falcon  # noqa: E402
import falcon.asgi  # noqa: E402
import falcon.media  # noqa: E402
from pydantic import ValidationError  # noqa: E402

import payloads as p  # noqa: E402
from item_model import ItemIn  # noqa: E402
from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402


class Fixed:
    """A resource answering one fixed payload: text, JSON media or the rendered /html page."""

    def __init__(self, content_type: str, *, text=None, media=None, render=None):
        self.content_type, self.text, self.media, self.render = content_type, text, media, render

    async def on_get(self, req, resp):
        resp.content_type = self.content_type
        if self.media is not None:
            resp.media = self.media
        else:
            resp.text = self.text if self.render is None else self.render()


class Stream:
    async def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_TEXT
        resp.stream = p.stream_chunks()


class ItemsStore:
    """Falcon component: the aiosqlite connection, opened and closed with the app (ASGI lifespan)."""

    async def process_startup(self, scope, event):
        self.db = await p.open_items_db(p.items_db_path())

    async def process_shutdown(self, scope, event):
        await p.close_items_db(self.db)


class Items:
    def __init__(self, store: ItemsStore):
        self.store = store

    async def on_post(self, req, resp):
        try:
            item = ItemIn.model_validate(await req.get_media())
        except ValidationError as e:
            raise falcon.HTTPUnprocessableEntity(
                description=e.errors(include_url=False, include_context=False, include_input=False)) from None
        stored = await p.store_item(self.store.db, item.name, item.price, item.tags)
        resp.status = falcon.HTTP_201
        resp.location = f"/items/{stored['id']}"
        resp.media = stored


# /page's session and compression, by hand (Falcon has neither): hooks of that resource only.
async def load_session(req, resp, resource, params):
    req.context.session = p.read_session(req.cookies.get(p.SESSION_COOKIE))


async def save_session(req, resp, resource):
    resp.set_cookie(p.SESSION_COOKIE, p.write_session(req.context.session), max_age=p.SESSION_MAX_AGE,
                    path="/", secure=False, http_only=True, same_site="Lax")


async def gzip_body(req, resp, resource):
    body = p.gzip_if_accepted(resp.text.encode(), req.get_header("Accept-Encoding"))
    if body is not None:
        resp.text, resp.data = None, body
        resp.set_header("Content-Encoding", "gzip")
        resp.append_header("Vary", "Accept-Encoding")


class Page:
    @falcon.before(load_session)
    @falcon.after(save_session)
    @falcon.after(gzip_body)
    async def on_get(self, req, resp):
        visits = req.context.session.get("visits", 0) + 1
        req.context.session["visits"] = visits
        resp.content_type = falcon.MEDIA_HTML
        resp.text = p.render_page(visits)


class WsEcho:
    async def on_websocket(self, req, ws):
        await ws.accept()
        try:
            while True:
                await ws.send_text(await ws.receive_text())
        except falcon.WebSocketDisconnected:
            pass


def create_app() -> falcon.asgi.App:
    store = ItemsStore()
    app = falcon.asgi.App(middleware=[falcon.CORSMiddleware(allow_origins=p.CORS_ORIGIN,
                                                            allow_credentials=p.CORS_ORIGIN), store])
    compact = falcon.media.JSONHandler(dumps=functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":")))
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = compact
    app.add_route("/ping", Fixed(falcon.MEDIA_TEXT, text=PONG.decode()))
    app.add_route("/json", Fixed(falcon.MEDIA_JSON, media=JSON_SMALL))
    app.add_route("/json-large", Fixed(falcon.MEDIA_JSON, media=JSON_LARGE))
    app.add_route("/html", Fixed(falcon.MEDIA_HTML, render=render_html))
    app.add_route("/stream", Stream())
    app.add_route("/items", Items(store))
    app.add_route("/page", Page())
    app.add_route("/ws-echo", WsEcho())
    return app


app = create_app()
