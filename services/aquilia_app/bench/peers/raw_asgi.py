"""The floor: a raw ASGI app (a dict lookup and two sends; JSON serialized per request with orjson, HTML
rendered per request) on the same servers.  python raw_asgi.py --port N [--server granian|uvicorn]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import orjson  # noqa: E402

from payloads import JSON_LARGE, JSON_SMALL, render_html  # noqa: E402

TEXT = [(b"content-type", b"text/plain; charset=utf-8")]
JSON = [(b"content-type", b"application/json")]
HTML = [(b"content-type", b"text/html; charset=utf-8")]
ROUTES = {
    "/ping": (TEXT, lambda: b"pong"),
    "/json": (JSON, lambda: orjson.dumps(JSON_SMALL)),
    "/json-large": (JSON, lambda: orjson.dumps(JSON_LARGE)),
    "/html": (HTML, lambda: render_html().encode()),
}


async def app(scope, receive, send):
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                await send({"type": msg["type"] + ".complete"})
                if msg["type"] == "lifespan.shutdown":
                    return
        return
    r = ROUTES.get(scope["path"])
    if r is None:
        await send({"type": "http.response.start", "status": 404, "headers": TEXT})
        await send({"type": "http.response.body", "body": b"not found"})
        return
    headers, make = r
    body = make()
    await send({"type": "http.response.start", "status": 200,
                "headers": headers + [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--server", choices=("granian", "uvicorn"), default="granian")
    a = p.parse_args()
    if a.server == "uvicorn":
        import uvicorn
        uvicorn.run(app, host=a.host, port=a.port, loop="uvloop", http="httptools", access_log=False,
                    log_level="warning")
    else:
        from pathlib import Path

        from granian import Granian
        from granian.constants import HTTPModes, Interfaces, Loops
        Granian("raw_asgi:app", address=a.host, port=a.port, interface=Interfaces.ASGI, workers=1,
                loop=Loops.uvloop, http=HTTPModes.http1, websockets=False, log_enabled=False,
                working_dir=Path(os.path.dirname(os.path.abspath(__file__)))).serve()
