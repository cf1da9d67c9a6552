"""An app without middleware for test_files.py and test_responses.py: files, static mounts, cookies,
redirects and server-sent events, run by the real servers.  ``AQUILIA_TEST_FILES`` names the tree
the test built (``make_tree``): ``public/`` is served, ``secret.txt`` next to it must never be."""
import asyncio
import contextlib
import os

from aquilia_app import App, Request, Response, StreamingResponse
from aquilia_app.files import FileResponse, StaticFiles
from aquilia_app.responses import RedirectResponse
from aquilia_app.sse import EventSourceResponse, ServerSentEvent

SECRET = b"TOP SECRET - outside the static root"
BIG_SIZE = 300 * 1024 + 7  # several 64 KiB chunks and an odd tail


def big_bytes() -> bytes:
    return bytes((i * 7 + i // 251) & 0xFF for i in range(BIG_SIZE))


def make_tree(base: str) -> None:
    """The files the app serves (and the ones it must not)."""
    pub = os.path.join(base, "public")
    os.makedirs(os.path.join(pub, "sub"))
    os.makedirs(os.path.join(pub, "emptydir"))
    files = {"secret.txt": SECRET, "big.bin": big_bytes(), "public/hello.txt": b"hello static\n",
             "public/index.html": b"<h1>root index</h1>", "public/sub/index.html": b"<h1>sub index</h1>",
             "public/sub/data.json": b'{"ok": true}', "public/.hidden": b"dot file",
             "public/\u00fcn\u00ef c\u00f6d\u00e9.txt": b"unicode name", "public/%2e%2e": b"a file named %2e%2e",
             "public/empty.txt": b""}
    for name, data in files.items():
        with open(os.path.join(base, name), "wb") as f:
            f.write(data)
    os.symlink(os.path.join(base, "secret.txt"), os.path.join(pub, "link-out"))
    os.symlink(base, os.path.join(pub, "dir-out"))
    os.symlink("hello.txt", os.path.join(pub, "link-in"))
    os.mkfifo(os.path.join(pub, "fifo"))


# The front ends every wire test runs on (granian's ASGI offers http.response.pathsend).
SERVERS = {"granian-rsgi": ("--interface", "rsgi"), "granian-asgi": ("--interface", "asgi"),
           "uvicorn": ("--server", "uvicorn")}


@contextlib.contextmanager
def serving(kind: str, base: str):
    """This app under the real server ``kind``, over the tree at ``base``: yields an httpx client."""
    import httpx
    from server_util import running_server

    with running_server("--app", "files_app:app", *SERVERS[kind], env={"AQUILIA_TEST_FILES": base}) as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield port, client


ROOT = os.environ.get("AQUILIA_TEST_FILES", "")
STATE = {"sse_closed": 0, "sse_started": 0}

app = App()
if ROOT:
    app.mount("/static", StaticFiles(os.path.join(ROOT, "public")))
    app.mount("/site", StaticFiles(os.path.join(ROOT, "public"), html=True, max_age=60))


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}


@app.get("/file")
async def file(request: Request):
    return FileResponse(os.path.join(ROOT, "big.bin"), request=request)


@app.get("/file-plain")
async def file_plain():
    return FileResponse(os.path.join(ROOT, "big.bin"))


@app.get("/download")
async def download(request: Request):
    return FileResponse(os.path.join(ROOT, "public", "hello.txt"), request=request,
                        filename='r\u00e9sum\u00e9 "final".txt')


@app.get("/missing-file")
async def missing_file():
    return FileResponse(os.path.join(ROOT, "no-such-file"))


@app.get("/vanishing-file")
async def vanishing_file(request: Request):
    path = os.path.join(ROOT, f"gone-{id(request)}.txt")
    with open(path, "wb") as f:
        f.write(b"soon gone")
    resp = FileResponse(path, request=request)
    os.unlink(path)  # after the stat, before the send
    return resp


@app.get("/cookies")
async def cookies():
    resp = Response.text("cookies")
    resp.set_cookie("plain", "v1")
    resp.set_cookie("sid", "abc123", max_age=3600, path="/app", domain="example.com", secure=True,
                    httponly=True, samesite="strict")
    resp.set_cookie("cross", '"quoted"', secure=True, samesite="none", partitioned=True)
    resp.delete_cookie("old")
    return resp


@app.get("/cookie-stream")
async def cookie_stream():
    async def gen():
        yield b"streamed"

    return StreamingResponse(gen()).set_cookie("s", "1", httponly=True)


@app.get("/nothing")
async def nothing():
    return None  # 204


@app.get("/redirect")
async def redirect(to: str, status: int = 307):
    return RedirectResponse(to, status)


async def _events(n: int, delay: float):
    STATE["sse_started"] += 1
    try:
        for i in range(n):
            yield ServerSentEvent({"i": i}, event="tick", id=str(i))
            await asyncio.sleep(delay)
        yield "multi\nline"
    finally:
        STATE["sse_closed"] += 1


@app.get("/sse")
async def sse(n: int = 3, delay: float = 0.0, ping: float = 15.0):
    return EventSourceResponse(_events(n, delay), ping=ping)


@app.get("/sse-state")
async def sse_state():
    """How many sources were started/closed, and the stream tasks still alive."""
    me = asyncio.current_task()
    alive = [t for t in asyncio.all_tasks() if t is not me and not t.done()
             and any(k in t.get_coro().__qualname__ for k in ("EventSource", "wait_for_disconnect"))]
    return dict(STATE, alive=len(alive))
