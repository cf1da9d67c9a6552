"""BlackSheep peer (run on uvicorn with uvloop + httptools)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from blacksheep import Application, html, json, text  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402

app = Application()


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
