"""Route groups (groups.py): prefixes, nesting, the group's middleware around its routes only, controllers,
WebSockets and mounts in a group, one group in several apps, and the mistakes refused."""
import pytest

from aquilia_app import App, Controller, Request, Response, RouteConflict, RouteGroup, WebSocket, get
from aquilia_app.middleware import Middleware
from aquilia_app.testclient import TestClient


async def where(scope, receive, send):
    """An ASGI app that answers with its root path."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": scope["root_path"].encode()})


class Tag(Middleware):
    """Appends its name to ``x-trail``: the order the middleware ran in, outermost first."""

    def __init__(self, name: str):
        self.name = name

    async def __call__(self, request, call_next):
        resp = await call_next(request)
        trail = resp.header("x-trail")
        return resp.with_headers([("x-trail", self.name + ("," + trail if trail else ""))], replace=True)


def _shop() -> RouteGroup:
    api = RouteGroup("/api/v1", middleware=[Tag("api")])

    @api.get("/items/{id:int}", name="item")
    async def item(id: int):
        return {"id": id}

    @api.post("/items", status=201, middleware=[Tag("route")])
    async def create():
        return {"created": True}

    @api.get("")
    async def api_root():
        return "api root"

    admin = RouteGroup("/admin", middleware=[Tag("admin")])

    @admin.get("/stats")
    async def stats(request: Request):
        return {"self": request.url_for("item", id=1)}

    api.include(admin)
    return api


def _app(group) -> App:
    app = App()

    @app.get("/plain")
    async def plain():
        return "plain"

    app.include(group)
    return app


def test_a_group_adds_its_routes_under_its_prefix_with_its_middleware_around_them():
    with TestClient(_app(_shop())) as client:
        r = client.get("/api/v1/items/3")
        assert (r.status_code, r.json(), r.headers["x-trail"]) == (200, {"id": 3}, "api")
        r = client.post("/api/v1/items")
        assert (r.status_code, r.headers["x-trail"]) == (201, "api,route")  # the group's, then the route's
        assert client.get("/api/v1").text == "api root"
        r = client.get("/api/v1/admin/stats")  # nested: prefixes joined, middleware outer first
        assert r.headers["x-trail"] == "api,admin"
        assert r.json() == {"self": "http://testserver/api/v1/items/1"}  # names kept as given
        r = client.get("/plain")
        assert r.text == "plain" and "x-trail" not in r.headers  # the app's other routes do not pay for it
        assert client.get("/items/3").status_code == 404


def test_one_group_in_two_apps():
    group = _shop()
    for _ in range(2):
        with TestClient(_app(group)) as client:
            assert client.get("/api/v1/items/9").json() == {"id": 9}


def test_controllers_websockets_and_mounts_in_a_group():
    class Orders(Controller):
        prefix = "/orders"

        @get("/{id:int}", middleware=[Tag("own")])
        async def read(self, id: int):
            return {"order": id}

    shop = RouteGroup("/shop", middleware=[Tag("shop")])
    shop.controller(Orders)
    shop.mount("/where", where)

    @shop.websocket("/ws/{room:slug}")
    async def chat(ws: WebSocket, room: str):
        await ws.accept()
        await ws.send_text(f"{room}: {await ws.receive_text()}")
        await ws.close()

    with TestClient(_app(shop)) as client:
        r = client.get("/shop/orders/7")
        assert (r.json(), r.headers["x-trail"]) == ({"order": 7}, "shop,own")
        r = client.post("/shop/where/x")
        assert (r.status_code, r.text) == (200, "/shop/where")
        with client.websocket_connect("/shop/ws/lobby") as ws:
            ws.send_text("hi")
            assert ws.receive_text() == "lobby: hi"


def test_mistakes_are_refused():
    with pytest.raises(ValueError, match="starts with '/'"):
        RouteGroup("api")
    with pytest.raises(TypeError, match="Middleware instances"):
        RouteGroup("/a", middleware=[lambda app: app])
    a, b = RouteGroup("/a"), RouteGroup("/b")
    with pytest.raises(ValueError, match="itself"):
        a.include(a)
    a.include(b)
    b.include(a)
    with pytest.raises(ValueError, match="cycle"):
        App().include(a)
    one, two = RouteGroup("/x"), RouteGroup("/x")
    for g in (one, two):
        g.get("/same")(lambda: Response.text("x"))
    app = App()
    app.include(one)
    app.include(two)
    with pytest.raises(RouteConflict):
        with TestClient(app):
            pass
