"""Sanic peer on its own server:  python sanic_app.py --port N [--workers W]

One process by default (``single_process``); ``--workers W`` > 1 runs Sanic's own worker manager (W
processes sharing the socket and one SQLite file, prepared once here, in the main process).

Idiomatic Sanic responses (its own json()/html()/text(), ``request.respond()`` to stream); the same-bytes
test checks they match aquilia_app.  /items: a pydantic model (unknown fields forbidden; sanic-ext, Sanic's
validation extension, is not installed) and aiosqlite opened before the server starts.  /page: Sanic has
no sessions, CORS or compression without sanic-ext, so they are written by hand as its users do, as
middleware of a blueprint holding /page alone (app-wide middleware would tax every other route): the
signed-cookie session (itsdangerous), gzip, and CORS for simple requests (no preflight handling: the bench
sends none).  /ws-echo: Sanic's websockets."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pydantic import ValidationError  # noqa: E402
from sanic import Blueprint, Sanic  # noqa: E402
from sanic.response import html, json, text  # noqa: E402

import payloads as p  # noqa: E402
from item_model import ItemIn  # noqa: E402
from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402

app = Sanic("perfkit_peer")
app.config.ACCESS_LOG = False
app.config.MOTD = False


@app.before_server_start
async def open_db(app):
    app.ctx.db = await p.open_items_db(p.items_db_path())


@app.after_server_stop
async def close_db(app):
    await p.close_items_db(app.ctx.db)


@app.get("/ping")
async def ping(request):
    return text(PONG.decode())


@app.get("/json")
async def json_small(request):
    return json(JSON_SMALL)


@app.get("/json-large")
async def json_large(request):
    return json(JSON_LARGE)


@app.get("/html")
async def page(request):
    return html(render_html())


@app.get("/stream")
async def stream(request):
    response = await request.respond(content_type="text/plain; charset=utf-8")
    async for chunk in p.stream_chunks():
        await response.send(chunk)
    await response.eof()


@app.post("/items")
async def create_item(request):
    try:
        item = ItemIn.model_validate_json(request.body)
    except ValidationError as e:
        return json({"detail": e.errors(include_url=False, include_context=False, include_input=False)}, status=422)
    stored = await p.store_item(request.app.ctx.db, item.name, item.price, item.tags)
    return json(stored, status=201, headers={"location": f"/items/{stored['id']}"})


visits_bp = Blueprint("visits")


@visits_bp.on_request
async def load_session(request):
    request.ctx.session = p.read_session(request.cookies.get(p.SESSION_COOKIE))


@visits_bp.on_response
async def cors(request, response):
    if request.headers.get("origin") == p.CORS_ORIGIN:  # simple requests from the one allowed origin
        response.headers["access-control-allow-origin"] = p.CORS_ORIGIN
        response.headers["access-control-allow-credentials"] = "true"
        response.headers.add("vary", "Origin")


@visits_bp.on_response
async def save_session_and_gzip(request, response):
    response.add_cookie(p.SESSION_COOKIE, p.write_session(request.ctx.session), path="/",
                        max_age=p.SESSION_MAX_AGE, httponly=True, samesite="Lax", secure=False)
    body = p.gzip_if_accepted(response.body, request.headers.get("accept-encoding"))
    if body is not None:
        response.body = body
        response.headers["content-encoding"] = "gzip"
        response.headers.add("vary", "Accept-Encoding")


@visits_bp.get("/page")
async def visit_page(request):
    visits = request.ctx.session.get("visits", 0) + 1
    request.ctx.session["visits"] = visits
    return html(p.render_page(visits))


app.blueprint(visits_bp)


@app.websocket("/ws-echo")
async def ws_echo(request, ws):
    async for message in ws:
        await ws.send(message)


if __name__ == "__main__":
    a = argparse.ArgumentParser()
    a.add_argument("--host", default="127.0.0.1")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--workers", type=int, default=1)
    args = a.parse_args()
    if args.workers < 1:
        a.error("--workers must be >= 1")
    p.prepare_items_db(p.items_db_path())  # once, before any worker opens the file
    app.run(host=args.host, port=args.port, workers=args.workers, single_process=args.workers == 1,
            access_log=False, motd=False)
