"""An app with every built-in native middleware, served by the real server in
test_middleware_native.py (``--app native_mw_app:app``), in this order (priority):

request id (1) -> trusted hosts (2) -> CORS (3) -> sessions (4) -> compression (5) -> timeout (6)
"""
import asyncio

from aquilia_app import App, Request, Response, StreamingResponse
from aquilia_app.compression import CompressionMiddleware
from aquilia_app.cors import CORSMiddleware
from aquilia_app.request_id import RequestIdMiddleware, current_request_id
from aquilia_app.sessions import SessionMiddleware
from aquilia_app.timeouts import TimeoutMiddleware
from aquilia_app.trusted_hosts import TrustedHostMiddleware

SECRET = "test-secret-key-0123456789abcdef"
ORIGIN = "https://app.example.com"
TIMEOUT = 0.5
PAGE = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(400))  # ~22 KB
CHUNK = "streamed line\n" * 40  # one chunk of the stream, well over the minimum size

# "t" is the Host of server_util's readiness probe; www.example.org is reached by redirect only.
HOSTS = ["t", "127.0.0.1", "example.com", "*.example.com", "www.example.org"]

app = App(debug=True)
app.add_middleware(RequestIdMiddleware, priority=1)
app.add_middleware(TrustedHostMiddleware, priority=2, allowed_hosts=HOSTS, www_redirect=True)
app.add_middleware(CORSMiddleware, priority=3, allow_origins=[ORIGIN], allow_methods=["GET", "POST", "PUT"],
                   allow_headers=["x-token"], allow_credentials=True, expose_headers=["x-request-id"])
app.add_middleware(SessionMiddleware, priority=4, secret_key=SECRET, max_age=60)
app.add_middleware(CompressionMiddleware, priority=5)
app.add_middleware(TimeoutMiddleware, priority=6, seconds=TIMEOUT)

_releases: dict = {}  # stream token -> Event the stream waits on before its last chunk


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}


@app.get("/page")
async def page():
    return Response(PAGE, headers=[("etag", '"page-v1"')])


@app.get("/small")
async def small():
    return {"small": True}


@app.get("/image")
async def image():
    return Response(b"\x89PNG" + bytes(range(256)) * 20, media_type="image/png")


@app.get("/stream")
async def stream(token: str):
    release = _releases.setdefault(token, asyncio.Event())

    async def chunks():
        yield CHUNK
        await asyncio.wait_for(release.wait(), 10)  # the client reads the first chunk before this
        yield "last chunk\n"

    return StreamingResponse(chunks())


@app.get("/release")
async def release(token: str):
    _releases.setdefault(token, asyncio.Event()).set()
    return {"released": token}


@app.get("/session")
async def session_get(request: Request):
    return dict(request.session)


@app.post("/session")
async def session_set(request: Request, key: str, value: str):
    request.session[key] = value
    return dict(request.session)


@app.delete("/session")
async def session_clear(request: Request):
    request.session.clear()
    return None


@app.post("/session/huge")
async def session_huge(request: Request):
    request.session["blob"] = "x" * 5000
    return {"stored": True}


@app.get("/rid")
async def rid():
    return {"request_id": current_request_id()}


@app.get("/slow")
async def slow():
    await asyncio.sleep(TIMEOUT * 10)
    return {"finished": True}
