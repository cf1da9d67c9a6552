"""rpc_app's peers on Django Channels (served by daphne):

- ``original``: the original library, channels-rpc's ``AsyncJsonRpcWebsocketConsumer``, methods ``echo`` and ``add``;
- ``plain``: a plain Channels ``AsyncJsonWebsocketConsumer`` answering each call with its params.

    python -m daphne -b 127.0.0.1 -p PORT channels_apps:original      (run from this folder)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import django  # noqa: E402
from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(DEBUG=False, SECRET_KEY="perfkit-bench", INSTALLED_APPS=["channels"], CHANNEL_LAYERS={},
                       ALLOWED_HOSTS=["*"])
    django.setup()

from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels_rpc import AsyncJsonRpcWebsocketConsumer  # noqa: E402
from django.urls import path  # noqa: E402


class Original(AsyncJsonRpcWebsocketConsumer):
    pass


@Original.rpc_method("echo")
def _echo(value=None):
    return value


@Original.rpc_method("add")
def _add(a, b):
    return a + b


class Plain(AsyncJsonWebsocketConsumer):
    async def receive_json(self, content, **kwargs):
        await self.send_json({"jsonrpc": "2.0", "id": content.get("id"), "result": content.get("params")})


original = ProtocolTypeRouter({"websocket": URLRouter([path("", Original.as_asgi())])})
plain = ProtocolTypeRouter({"websocket": URLRouter([path("", Plain.as_asgi())])})
