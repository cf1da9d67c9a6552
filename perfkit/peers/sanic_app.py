"""Sanic peer on its own server, one process:  python sanic_app.py --port N

Idiomatic Sanic responses (its own json()/html()/text()); the same-bytes test checks they match aquilia_app."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sanic import Sanic  # noqa: E402
from sanic.response import html, json, text  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402

app = Sanic("perfkit_peer")
app.config.ACCESS_LOG = False
app.config.MOTD = False


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


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    app.run(host=a.host, port=a.port, single_process=True, access_log=False, motd=False)
