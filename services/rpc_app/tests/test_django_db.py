"""The Channels adapter with a real SQLite database: ORM calls in sync and blocking methods, permissions,
and push through Channels groups. Run with RPC_APP_TEST_DATABASE=1 (the Bazel target sets it), which makes
conftest.py configure Django with a database, auth and an in-memory channel layer."""

import os

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from rpc_app import RpcContext
from rpc_app.django_channels import AsyncJsonRpcConsumer, broadcast, rpc_method

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.skipif(not os.environ.get("RPC_APP_TEST_DATABASE"), reason="needs RPC_APP_TEST_DATABASE=1"),
]


class ShopConsumer(AsyncJsonRpcConsumer):
    @rpc_method("items.add")
    def add_item(self, name: str):
        from rpcshop.models import Item  # a plain sync ORM call: it must not run on the event loop
        return Item.objects.create(name=name).pk

    @rpc_method("items.count", blocking=True)
    def count(self):
        from rpcshop.models import Item
        return Item.objects.count()

    @rpc_method("items.names", permission_required="rpcshop.view_item")
    def names(self):
        from rpcshop.models import Item
        return sorted(Item.objects.values_list("name", flat=True))

    @rpc_method("items.secret", permission_required=["rpcshop.view_item", "rpcshop.delete_item"])
    async def secret(self):
        return "ok"

    @rpc_method("rooms.join")
    async def join(self, room: str, ctx: RpcContext):
        await ctx.join(room)
        return room

    @rpc_method("rooms.say")
    async def say(self, room: str, text: str, ctx: RpcContext):
        await ctx.broadcast(room, "rooms.message", {"room": room, "text": text})
        return True


class WithUser:
    def __init__(self, app, user):
        self.app, self.user = app, user

    async def __call__(self, scope, receive, send):
        return await self.app(dict(scope, user=self.user), receive, send)


@pytest.fixture(scope="module", autouse=True)
def database():
    from django.core.management import call_command
    call_command("migrate", run_syncdb=True, verbosity=0)


async def connect(user=None):
    app = ShopConsumer.as_asgi()
    c = WebsocketCommunicator(WithUser(app, user) if user is not None else app, "/ws/shop/")
    ok, _ = await c.connect()
    assert ok
    return c


async def call(c, method, params=None, rid=1):
    msg = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        msg["params"] = params
    await c.send_to(text_data=orjson.dumps(msg).decode())
    return orjson.loads(await c.receive_from(5))


@database_sync_to_async
def make_user(name, *perms):
    from django.contrib.auth.models import Permission, User
    user = User.objects.create_user(name)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label="rpcshop"))
    return User.objects.get(pk=user.pk)  # fresh: the permission cache is filled on first use


async def test_sync_and_blocking_methods_use_the_orm():
    c = await connect()
    try:
        first = await call(c, "items.add", ["apple"])
        second = await call(c, "items.add", {"name": "pear"}, 2)
        assert isinstance(first["result"], int) and second["result"] == first["result"] + 1, (first, second)
        assert (await call(c, "items.count", None, 3))["result"] >= 2
    finally:
        await c.disconnect()


async def test_permission_required():
    anonymous = await connect()
    reader = await connect(await make_user("reader", "view_item"))
    admin = await connect(await make_user("admin", "view_item", "delete_item"))
    try:
        denied = await call(anonymous, "items.names")
        assert denied["error"]["code"] == -32005 and denied["error"]["data"] == {"required": ["rpcshop.view_item"]}
        assert isinstance((await call(reader, "items.names"))["result"], list)
        assert (await call(reader, "items.secret"))["error"]["code"] == -32005
        assert (await call(admin, "items.secret"))["result"] == "ok"
    finally:
        for c in (anonymous, reader, admin):
            await c.disconnect()


async def test_push_through_channels_groups():
    alice, bob, carol = await connect(), await connect(), await connect()
    try:
        assert (await call(alice, "rooms.join", ["lobby"]))["result"] == "lobby"
        assert (await call(bob, "rooms.join", ["lobby"]))["result"] == "lobby"
        assert (await call(carol, "rooms.say", ["lobby", "hello"]))["result"] is True
        expected = {"jsonrpc": "2.0", "method": "rooms.message", "params": {"room": "lobby", "text": "hello"}}
        assert orjson.loads(await alice.receive_from(5)) == expected
        assert orjson.loads(await bob.receive_from(5)) == expected
        assert await carol.receive_nothing(0.2)  # carol did not join
        await broadcast("lobby", "rooms.closing")  # from outside any consumer
        assert orjson.loads(await alice.receive_from(5)) == {"jsonrpc": "2.0", "method": "rooms.closing"}
        await bob.disconnect()  # leaves its groups
        await broadcast("lobby", "rooms.again", [1])
        assert orjson.loads(await alice.receive_from(5))["method"] == "rooms.again"
    finally:
        await alice.disconnect()
        await carol.disconnect()
