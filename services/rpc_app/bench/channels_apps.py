"""ASGI app for the real-socket bench: rpc_app's Channels adapter at /ours/, channels-rpc 1.0.1 at /theirs/.

    python -m daphne -b 127.0.0.1 -p PORT channels_apps:application   (with bench/ on PYTHONPATH)
"""

import _setup

_setup.django_setup()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels_rpc import AsyncJsonRpcWebsocketConsumer  # noqa: E402
from django.urls import path  # noqa: E402

from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method  # noqa: E402


class Ours(AsyncJsonRpcConsumer):
    @rpc_method()
    def add(self, a: int, b: int):
        return a + b


class Theirs(AsyncJsonRpcWebsocketConsumer):
    pass


@Theirs.rpc_method("add")
def _add(a, b):
    return a + b


application = ProtocolTypeRouter({"websocket": URLRouter([
    path("ours/", Ours.as_asgi()),
    path("theirs/", Theirs.as_asgi()),
])})
