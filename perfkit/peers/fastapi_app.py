"""FastAPI peer (run on uvicorn with uvloop + httptools): the default JSON response class, as users get it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fastapi import FastAPI  # noqa: E402
from fastapi.responses import PlainTextResponse  # noqa: E402

from payloads import JSON_SMALL, PONG  # noqa: E402

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


@app.get("/ping")
async def ping():
    return PlainTextResponse(PONG)


@app.get("/json")
async def json_small():
    return JSON_SMALL
