"""BlackSheep peer, served by uvicorn with httptools + uvloop: python blacksheep_app.py --port N"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import uvicorn  # noqa: E402
from blacksheep import Application, get, html, json, text  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, port_arg, render_html  # noqa: E402

app = Application()


@get("/ping")
async def ping():
    return text("pong")


@get("/json")
async def json_small():
    return json(JSON_SMALL)


@get("/json-large")
async def json_large():
    return json(JSON_LARGE)


@get("/html")
async def page():
    return html(render_html())


if __name__ == "__main__":
    host, port = port_arg()
    uvicorn.run(app, host=host, port=port, loop="uvloop", http="httptools", access_log=False, log_level="warning")
