"""OpenAPI 3.1: the document generated from routes and types is valid (openapi-spec-validator) and says
what the handlers take and return; the docs page and its assets are served from the package."""
from typing import Annotated

import httpx
import msgspec
import pytest
from openapi_spec_validator import validate

from aquilia_app import App, Body, Controller, get, post
from aquilia_app.controllers import Header
from aquilia_app.openapi import openapi_document


class ItemIn(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    price: Annotated[float, msgspec.Meta(ge=0)]


class ItemOut(ItemIn):
    id: int


class Items(Controller):
    prefix = "/items"

    @get("/{id:int|min=1}", name="item")
    async def read(self, id: int) -> ItemOut:
        """Read one item.

        Answers 404 when there is none."""
        return ItemOut("x", 1.0, id)

    @get("")
    async def index(self, limit: int = 20, q: str | None = None) -> list[ItemOut]:
        return []

    @post("", status=201)
    async def create(self, body: ItemIn, x_api_key: Header[str]) -> ItemOut:
        return ItemOut(body.name, body.price, 1)


def make_app():
    app = App()
    app.controller(Items)

    @app.get("/posts[/{page:int}]")
    async def posts(page: int = 1):
        return {"page": page}

    @app.post("/numbers")
    async def numbers(body: Body[list[int]]) -> dict:
        return {"n": len(body)}

    @app.get("/plain")
    async def plain():
        return "text"

    app.enable_openapi(title="Items API", version="2.0.0")
    return app


def test_the_document_is_valid_openapi_3_1():
    doc = openapi_document(make_app(), title="Items API", version="2.0.0")
    validate(doc)
    assert doc["openapi"] == "3.1.0" and doc["info"] == {"title": "Items API", "version": "2.0.0"}


def test_paths_parameters_bodies_and_responses():
    doc = openapi_document(make_app(), title="t", version="1")
    paths = doc["paths"]
    read = paths["/items/{id}"]["get"]
    assert read["summary"] == "Read one item." and "404" in read["description"]
    assert read["tags"] == ["Items"]
    (pid,) = read["parameters"]
    assert pid == {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
    assert read["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ItemOut"}
    index = {p["name"]: p for p in paths["/items"]["get"]["parameters"]}
    assert index["limit"]["in"] == "query" and index["limit"]["required"] is False
    assert index["limit"]["schema"]["type"] == "integer"
    create = paths["/items"]["post"]
    assert "201" in create["responses"] and "422" in create["responses"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ItemIn"}
    (key,) = create["parameters"]
    assert key["in"] == "header" and key["name"].lower() == "x-api-key" and key["required"] is True
    item_in = doc["components"]["schemas"]["ItemIn"]
    assert item_in["properties"]["name"] == {"type": "string", "minLength": 1, "maxLength": 100}
    # an optional part gives two paths; the parameter only where it is in the path
    assert "parameters" not in paths["/posts"]["get"] or all(p["in"] != "path" for p in paths["/posts"]["get"]["parameters"])
    assert paths["/posts/{page}"]["get"]["parameters"][0]["in"] == "path"
    assert paths["/numbers"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "type": "array", "items": {"type": "integer"}}
    assert "/openapi.json" not in paths and "/docs" not in paths


@pytest.mark.asyncio
async def test_served_document_and_docs_page():
    app = make_app()
    await app.startup()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            r = await c.get("/openapi.json")
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
            validate(r.json())
            page = await c.get("/docs")
            assert page.status_code == 200 and "swagger-ui-bundle.js" in page.text
            js = await c.get("/docs/assets/swagger-ui-bundle.js")
            assert js.status_code == 200 and len(js.content) > 100_000
    finally:
        await app.shutdown()


@pytest.mark.asyncio
async def test_docs_page_and_document_behind_a_root_path():
    """Behind ``--root-path /api`` (or a mounting app) the page must load ``/api/openapi.json`` and
    ``/api/docs/assets/...``, and the document names the prefix in ``servers`` (FastAPI does both)."""
    import re

    app = make_app()
    await app.startup()
    try:
        transport = httpx.ASGITransport(app=app, root_path="/api")
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            page = (await c.get("/api/docs")).text
            assert 'url: "/api/openapi.json"' in page
            urls = re.findall(r'(?:href|src)="([^"]+)"', page)
            assert urls and all(u.startswith("/api/docs/assets/") for u in urls)
            for u in urls:
                assert (await c.get(u)).status_code == 200
            doc = (await c.get("/api/openapi.json")).json()
            validate(doc)
            assert doc["servers"] == [{"url": "/api"}]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            assert "servers" not in (await c.get("/openapi.json")).json()  # no root path: none
            assert 'url: "/openapi.json"' in (await c.get("/docs")).text
    finally:
        await app.shutdown()


def test_off_unless_enabled():
    app = App()

    @app.get("/x")
    async def x():
        return 1

    app.compile()
    assert app.router.match("GET", "/openapi.json").route is None


def test_route_options_and_route_groups_shape_the_document():
    from aquilia_app import RouteGroup

    app = App()

    @app.get("/old", tags=["legacy"], deprecated=True, summary="The old way", description="Use /new.")
    async def old():
        """Docstring summary.

        Docstring description."""
        return "old"

    @app.get("/hidden", include_in_schema=False)
    async def hidden():
        return "hidden"

    @app.get("/plain")
    async def plain():
        """From the docstring."""
        return "plain"

    v1 = RouteGroup("/v1", tags=["v1"])
    admin = RouteGroup("/admin", tags=["admin"])

    @admin.get("/stats", tags=["stats"])
    async def stats():
        return {}

    class Legacy(Controller):
        prefix = "/legacy"

        @get("", tags=["old"], deprecated=True)
        async def index(self):
            return []

    v1.include(admin)
    v1.controller(Items)
    v1.controller(Legacy)
    app.include(v1)
    app.mount("/files", lambda request, path: None)
    doc = openapi_document(app, title="t", version="1")
    validate(doc)
    old_op = doc["paths"]["/old"]["get"]
    assert (old_op["tags"], old_op["deprecated"], old_op["summary"], old_op["description"]) == \
        (["legacy"], True, "The old way", "Use /new.")
    plain_op = doc["paths"]["/plain"]["get"]
    assert plain_op["summary"] == "From the docstring." and "tags" not in plain_op and "deprecated" not in plain_op
    assert "/hidden" not in doc["paths"] and not any(p.startswith("/files") for p in doc["paths"])
    assert doc["paths"]["/v1/admin/stats"]["get"]["tags"] == ["v1", "admin", "stats"]  # outer group first
    assert doc["paths"]["/v1/items/{id}"]["get"]["tags"] == ["Items", "v1"]  # the controller's own tag first
    legacy = doc["paths"]["/v1/legacy"]["get"]
    assert (legacy["tags"], legacy["deprecated"]) == (["Legacy", "v1", "old"], True)


def test_route_options_are_checked_where_the_route_is_declared():
    from aquilia_app import RouteGroup

    for bad in ({"tags": "items"}, {"tags": [""]}, {"summary": 3}, {"colour": "red"}):
        with pytest.raises(TypeError):
            App().get("/x", **bad)
        with pytest.raises(TypeError):
            get("/x", **bad)  # a controller's
        with pytest.raises(TypeError):
            RouteGroup("/g").get("/x", **bad)
    with pytest.raises(TypeError):
        RouteGroup("/g", tags="v1")


def test_operation_ids_are_unique():
    """Two handlers of the same name (each module's ``index``), one handler on two paths and one group
    under two prefixes: a document with a repeated operationId is invalid (and breaks client generators)."""
    from aquilia_app import RouteGroup

    def group(prefix):
        g = RouteGroup(prefix)

        @g.get("")
        async def index(limit: int = 10):
            return []

        index.__qualname__ = "index"  # as a module-level function of two modules is
        return g

    app = App()
    app.include(group("/users"))
    app.include(group("/items"))

    @app.get("/a")
    @app.get("/b")
    async def both():
        return {}

    versions = RouteGroup("/shared")

    @versions.get("/x")
    async def shared_x():
        return {}

    for prefix in ("/v1", "/v2"):
        outer = RouteGroup(prefix)
        outer.include(versions)
        app.include(outer)
    doc = openapi_document(app, title="t", version="1")
    validate(doc)
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)) == 6
    assert doc["paths"]["/users"]["get"]["operationId"] == "index_get"  # the first keeps its plain id


def test_path_constraints_and_an_apps_own_problem_model():
    """``in=`` values have the parameter's type, ``re=`` is anchored (the router matches the whole
    segment), and an app's own ``Problem`` model is not replaced by the framework's problem+json schema."""

    class Problem(msgspec.Struct):  # the app's own model of that name
        code: int

    app = App()

    @app.get("/levels/{n:int|in=1,2,3}/{code:str|re=[a-z]+}")
    async def level(n: int, code: str, verbose: bool = False) -> Problem:
        return Problem(n)

    doc = openapi_document(app, title="t", version="1")
    validate(doc)
    op = doc["paths"]["/levels/{n}/{code}"]["get"]
    params = {p["name"]: p["schema"] for p in op["parameters"]}
    assert params["n"] == {"type": "integer", "enum": [1, 2, 3]}
    assert params["code"] == {"type": "string", "pattern": "^(?:[a-z]+)$"}
    ok = op["responses"]["200"]["content"]["application/json"]["schema"]
    schemas = doc["components"]["schemas"]
    assert schemas[ok["$ref"].rsplit("/", 1)[1]]["properties"] == {"code": {"type": "integer"}}
    problem = op["responses"]["422"]["content"]["application/problem+json"]["schema"]["$ref"]
    assert problem != ok["$ref"] and "status" in schemas[problem.rsplit("/", 1)[1]]["properties"]
