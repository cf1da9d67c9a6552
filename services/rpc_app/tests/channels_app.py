"""A Django Channels ASGI application using rpc_app's adapter (served by daphne in the tests)."""

import asyncio
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import django  # noqa: E402
from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(DEBUG=False, SECRET_KEY="rpc-app-tests", INSTALLED_APPS=["channels"], CHANNEL_LAYERS={})
    django.setup()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from rpc_app import Limits, RpcContext, RpcError  # noqa: E402
from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method  # noqa: E402

cancelled = []


class DemoConsumer(AsyncJsonRpcConsumer):
    rpc_limits = Limits(max_message_bytes=100_000, max_depth=16)
    rpc_max_in_flight = 16

    @rpc_method()
    def add(self, a: int, b: int):
        return a + b

    @AsyncJsonRpcConsumer.rpc_method("echo")
    def echo_method(self, value=None):
        return value

    @rpc_method()
    async def sleep(self, seconds: float, ctx: RpcContext):
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.append(ctx.request_id)
            raise
        return ctx.request_id

    @rpc_method()
    def whoami(self, ctx: RpcContext):
        return {"user": ctx.user, "path": ctx.scope.get("path"), "same_consumer": ctx.consumer is self}

    @rpc_method()
    def fail(self):
        raise RuntimeError("hidden")

    @rpc_method()
    def fail_rpc(self):
        raise RpcError(-32042, "nope")

    @rpc_method(blocking=True)
    def blocking(self, x: int):
        import time
        time.sleep(0.01)
        return x


class ChildConsumer(DemoConsumer):
    @rpc_method()
    def add(self, a: int, b: int):  # overrides the parent's
        return a + b + 1000


application = ProtocolTypeRouter({
    "websocket": URLRouter([
        path("ws/rpc/", DemoConsumer.as_asgi()),
        path("ws/child/", ChildConsumer.as_asgi()),
    ]),
})
