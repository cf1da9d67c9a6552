"""FastAPI peer (run on uvicorn with uvloop + httptools): the default JSON response class, as users get it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fastapi import FastAPI  # noqa: E402
from fastapi.responses import HTMLResponse, PlainTextResponse  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, PONG, render_html  # noqa: E402

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


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
