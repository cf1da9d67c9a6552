"""Sanic peer: python sanic_app.py --port N (one process, no access log)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sanic import Sanic  # noqa: E402
from sanic.response import html, json, text  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, port_arg, render_html  # noqa: E402

app = Sanic("peer_sanic")


@app.get("/ping")
async def ping(request):
    return text("pong")


@app.get("/json")
async def json_small(request):
    return json(JSON_SMALL)


@app.get("/json-large")
async def json_large(request):
    return json(JSON_LARGE)


@app.get("/html")
async def page(request):
    return html(render_html())


if __name__ == "__main__":
    host, port = port_arg()
    app.run(host=host, port=port, single_process=True, access_log=False, motd=False, debug=False)
