"""The peer's routes, written the way aquilia's scaffolded controllers are (Controller + @GET + Response)."""
import os
import sys

# payloads.py is shared by every peer in perfkit/peers/, three folders up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from aquilia import GET, Controller, RequestCtx, Response  # noqa: E402

from payloads import HTML_CONTEXT, JSON_LARGE, JSON_SMALL, PONG  # noqa: E402

_PONG = PONG.decode()


class BenchController(Controller):
    prefix = "/"

    @GET("/ping")
    async def ping(self, ctx: RequestCtx):
        return Response.text(_PONG)

    @GET("/json")
    async def json_small(self, ctx: RequestCtx):
        return Response.json(JSON_SMALL)

    @GET("/json-large")
    async def json_large(self, ctx: RequestCtx):
        return Response.json(JSON_LARGE)

    @GET("/html")
    async def html(self, ctx: RequestCtx):
        return await self.render("page.html", HTML_CONTEXT, ctx)
