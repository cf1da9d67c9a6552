"""FastAPI peer (idiomatic defaults), served by uvicorn with httptools + uvloop: python fastapi_app.py --port N"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from fastapi.responses import HTMLResponse, PlainTextResponse  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, port_arg, render_html  # noqa: E402

app = FastAPI()


@app.get("/ping", response_class=PlainTextResponse)
async def ping():
    return "pong"


@app.get("/json")
async def json_small():
    return JSON_SMALL


@app.get("/json-large")
async def json_large():
    return JSON_LARGE


@app.get("/html", response_class=HTMLResponse)
async def page():
    return render_html()


if __name__ == "__main__":
    host, port = port_arg()
    uvicorn.run(app, host=host, port=port, loop="uvloop", http="httptools", access_log=False, log_level="warning")
