"""An app without middleware, so that RSGI requests take the direct path (not the ASGI adapter), for
test_robustness.py: a ``Response`` subclass and handlers that never read the request body."""
from aquilia_app import App, ProxyHeadersMiddleware, Request, Response, StreamingResponse

GREETING_LINES = 2000  # ~24 KB: more than one write


class Greeting(Response):
    """A ``Response`` subclass with its own constructor and a header of its own."""

    def __init__(self, who: str):
        super().__init__(f"hello {who}\n" * GREETING_LINES, 200, [("x-greeting", who)])


app = App()


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}


@app.get("/subclass")
async def subclass():
    return Greeting("world")


@app.post("/ignore")
async def ignore():
    return {"ignored": True}


@app.post("/ignore-stream")
async def ignore_stream():
    async def gen():
        yield b"streamed"

    return StreamingResponse(gen())


@app.post("/echo-stream")
async def echo_stream(request: Request):
    async def gen():  # reads the body only once the response has started
        yield await request.body()

    return StreamingResponse(gen())


@app.get("/header/{name}", name="header")
async def header(request: Request, name: str):
    first = request.header(name)  # before the header index exists
    return {"scan": first, "indexed": request.headers.get(name), "all": request.headers.getall(name)}


@app.get("/whoami", name="whoami")
async def whoami(request: Request):
    client = request.client
    request.state.seen = True  # request.state on either front end (RSGIRequest and Request)
    return {"client": [client.host, client.port], "url": request.url, "base_url": request.base_url,
            "header_x": request.url_for("header", name="x y"), "state": request.state.seen}


@app.post("/count-stream")
async def count_stream(request: Request):
    sizes = [len(chunk) async for chunk in request.stream()]
    return {"bytes": sum(sizes), "chunks": len(sizes)}


WATCHED = {"gone": 0}


@app.get("/until-gone")
async def until_gone(request: Request, seconds: float = 5.0):
    import asyncio
    for _ in range(int(seconds / 0.05)):
        if await request.is_disconnected():
            WATCHED["gone"] += 1
            return {"gone": True}
        await asyncio.sleep(0.05)
    return {"gone": False}


@app.get("/watched")
async def watched():
    return dict(WATCHED)


@app.get("/forwarded", middleware=[ProxyHeadersMiddleware()])  # this route only: the others stay direct
async def forwarded(request: Request):
    return {"client": request.client.host, "url": request.url}
