"""Typed handler parameters: header, cookie, query (repeated, renamed), path, form fields, files, the
request and its background tasks; 422 problems saying where each bad value was; annotations the
binder cannot serve are refused when the app compiles.  The RSGI mirror (query_list, cookies) runs on
the real granian."""
import asyncio
import enum
from typing import Annotated, Literal

import httpx
import msgspec
import pytest

import forms_app
from aquilia_app import App, Container, Request
from aquilia_app.background import BackgroundTasks
from aquilia_app.controllers import Body, Cookie, Form, Header, Query, describe_plan
from aquilia_app.forms import FormData, UploadFile
from aquilia_app.requests import parse_cookie_header
from server_util import running_server


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Level(enum.IntEnum):
    low = 1
    high = 2


class Item(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    tags: list[str] = []
    sub: dict[str, int] = {}


class MyRequest(Request):
    __slots__ = ()


def make_app() -> App:
    app = App()

    @app.get("/headers")
    async def headers(x_api_key: Header[str], agent: Annotated[str, Header(alias="User-Agent")],
                      x_count: Header[int] = 0, x_list: Header[list[int]] = []):
        return {"key": x_api_key, "agent": agent, "count": x_count, "list": x_list}

    @app.get("/cookies")
    async def cookies(session: Cookie[str], theme: Cookie[Literal["dark", "light"]] = "light",
                      visits: Cookie[int | None] = None):
        return {"session": session, "theme": theme, "visits": visits}

    @app.get("/query")
    async def query(tag: list[str] = [], n: list[int] = [], color: Color = Color.red, level: Level = Level.low,
                    mode: Literal["fast", "slow"] = "fast", limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10,
                    page_size: Annotated[int, Query(alias="page-size")] = 20, ratio: float | None = None,
                    flag: bool = False, name: Annotated[str, msgspec.Meta(max_length=5)] = "x",
                    ids: Annotated[list[int], msgspec.Meta(max_length=3)] = []):
        return {"tag": tag, "n": n, "color": color.value, "level": int(level), "mode": mode, "limit": limit,
                "page_size": page_size, "ratio": ratio, "flag": flag, "name": name, "ids": ids}

    @app.get("/paint/{color}")
    async def paint(color: Color):
        return {"color": color.value}

    @app.post("/items")
    async def items(body: Item, dry: bool = False):
        return {"name": body.name, "dry": dry}

    @app.post("/numbers")
    async def numbers(body: Body[list[Annotated[int, msgspec.Meta(ge=0)]]]):
        return {"sum": sum(body)}

    @app.post("/fields")
    async def fields(title: Form[str], n: Form[list[int]] = [], age: Annotated[int, Form(alias="the-age")] = 0):
        return {"title": title, "n": n, "age": age}

    @app.post("/upload")
    async def upload(doc: UploadFile, more: list[UploadFile] = [], form: FormData = None):
        return {"doc": doc.filename, "more": [m.filename for m in more], "keys": list(form.keys())}

    @app.get("/request")
    async def req(r: MyRequest, tasks: BackgroundTasks, again: BackgroundTasks):
        return {"same_request": isinstance(r, Request), "tasks_shared": tasks is again is r.background}

    return app


def call(method, url, app=None, **kw):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app or make_app()), base_url="http://t") as c:
            return await c.request(method, url, **kw)
    return asyncio.run(go())


def errors_of(r) -> list:
    assert r.status_code == 422, r.text
    p = r.json()
    assert p["title"] == "Unprocessable Content" and r.headers["content-type"] == "application/problem+json"
    return p["errors"]


# -- headers -----------------------------------------------------------------------------------------
def test_headers_by_derived_name_alias_and_type():
    r = call("GET", "/headers", headers={"X-API-KEY": "k", "user-agent": "ua/1", "x-count": "3",
                                         "x-list": "1, 2"})
    assert r.json() == {"key": "k", "agent": "ua/1", "count": 3, "list": [1, 2]}
    r = call("GET", "/headers", headers=[("x-api-key", "k"), ("x-list", "1"), ("x-list", "2,3")])
    assert r.json()["list"] == [1, 2, 3]  # repeated and comma-separated alike


def test_header_errors_are_422_with_location():
    assert errors_of(call("GET", "/headers", headers={"user-agent": "u"})) == [
        {"loc": ["header", "x-api-key"], "msg": "required", "type": "missing"}]
    errs = errors_of(call("GET", "/headers", headers={"x-api-key": "k", "user-agent": "u", "x-count": "many",
                                                      "x-list": "1,b"}))
    assert [e["loc"] for e in errs] == [["header", "x-count"], ["header", "x-list", 1]]


# -- cookies -----------------------------------------------------------------------------------------
def test_cookie_parameters():
    r = call("GET", "/cookies", headers={"cookie": 'session=abc; theme="dark"; visits=4'})
    assert r.json() == {"session": "abc", "theme": "dark", "visits": 4}
    r = call("GET", "/cookies", headers={"cookie": "session=abc"})
    assert r.json() == {"session": "abc", "theme": "light", "visits": None}
    errs = errors_of(call("GET", "/cookies", headers={"cookie": "theme=blue; visits=x"}))
    assert {tuple(e["loc"]) for e in errs} == {("cookie", "session"), ("cookie", "theme"), ("cookie", "visits")}


def test_the_cookie_parser_is_tolerant():
    assert parse_cookie_header('a=1; junk; =nameless; b="two"; c=x=y; a=shadowed;  d = 4 ;;') == {
        "a": "1", "b": "two", "c": "x=y", "d": "4"}
    assert parse_cookie_header("") == {} and parse_cookie_header('bad"name; ok=1') == {"ok": "1"}


def test_the_cookie_parser_undoes_http_cookies_escapes_in_quoted_values():
    assert parse_cookie_header(r'a="x\054y\073\"z\\"; b=un\054quoted; c="\q\1\400"; d="end\"; e="\351"') == {
        "a": 'x,y;"z\\', "b": "un\\054quoted", "c": "q1400", "d": "end\\", "e": "\u00e9"}


# -- query -------------------------------------------------------------------------------------------
def test_query_lists_enums_literals_constraints_and_aliases():
    r = call("GET", "/query?tag=a&tag=b&n=1&n=2&color=blue&level=2&mode=slow&limit=100&page-size=5"
                    "&ratio=0.5&flag=yes&name=abc&ids=1&ids=2")
    assert r.json() == {"tag": ["a", "b"], "n": [1, 2], "color": "blue", "level": 2, "mode": "slow", "limit": 100,
                        "page_size": 5, "ratio": 0.5, "flag": True, "name": "abc", "ids": [1, 2]}
    r = call("GET", "/query")
    assert r.json()["tag"] == [] and r.json()["ratio"] is None and r.json()["page_size"] == 20


def test_every_bad_query_value_is_reported_at_once():
    errs = errors_of(call("GET", "/query?n=1&n=x&color=green&level=7&mode=warp&limit=0&page-size=big&ratio=nan"
                                 "&flag=maybe&name=toolong&ids=1&ids=2&ids=3&ids=4"))
    by_loc = {tuple(e["loc"]): e for e in errs}
    assert set(by_loc) == {("query", "n", 1), ("query", "color"), ("query", "level"), ("query", "mode"),
                           ("query", "limit"), ("query", "page-size"), ("query", "ratio"), ("query", "flag"),
                           ("query", "name"), ("query", "ids")}
    assert by_loc[("query", "limit")]["type"] == "constraint" and "1" in by_loc[("query", "limit")]["msg"]
    assert by_loc[("query", "color")]["type"] == "enum"


def test_a_path_parameter_with_a_rich_type_is_converted_or_422():
    assert call("GET", "/paint/blue").json() == {"color": "blue"}
    assert errors_of(call("GET", "/paint/green"))[0]["loc"] == ["path", "color"]


def test_an_untyped_path_segment_is_converted_to_the_annotation_or_422():
    """``/items/{item_id}`` with ``item_id: int``, as FastAPI apps write it: the handler gets an int, and a
    value that is not one is a 422 at ["path", "item_id"] (a typed segment, ``{id:int}``, still 404s)."""
    import uuid

    app = App()

    @app.get("/items/{item_id}")
    async def item(item_id: int):
        return {"item_id": item_id, "is_int": type(item_id) is int}

    @app.get("/ratio/{r}/{u}")
    async def ratio(r: float, u: uuid.UUID):
        return {"r": r, "u": str(u), "is_uuid": isinstance(u, uuid.UUID)}

    @app.get("/code/{code:int}")
    async def code(code: str):
        return {"code": code}

    assert call("GET", "/items/5", app=app).json() == {"item_id": 5, "is_int": True}
    assert errors_of(call("GET", "/items/abc", app=app))[0]["loc"] == ["path", "item_id"]
    u = "12345678-1234-5678-1234-567812345678"
    assert call("GET", f"/ratio/1.5/{u}", app=app).json() == {"r": 1.5, "u": u, "is_uuid": True}
    errs = errors_of(call("GET", "/ratio/x/nope", app=app))
    assert {tuple(e["loc"]) for e in errs} == {("path", "r"), ("path", "u")}
    assert call("GET", "/code/7", app=app).json() == {"code": "7"}


# -- bodies --------------------------------------------------------------------------------------------
def test_body_errors_map_msgspec_paths_into_loc():
    errs = errors_of(call("POST", "/items", content=b'{"name":"a","tags":["x",2]}'))
    assert errs == [{"loc": ["body", "tags", 1], "msg": "Expected `str`, got `int`", "type": "type"}]
    assert errors_of(call("POST", "/items", content=b'{"tags":[]}'))[0]["loc"] == ["body", "name"]
    assert errors_of(call("POST", "/items", content=b'{"name":""}'))[0]["type"] == "constraint"
    assert errors_of(call("POST", "/items", content=b'{"name":"a","sub":{"k":"v"}}'))[0]["loc"] == ["body", "sub", "..."]
    assert errors_of(call("POST", "/items", content=b'{"name":"a","zz":1}'))[0]["type"] == "unknown_field"
    assert errors_of(call("POST", "/numbers", content=b"[1,-2]"))[0]["loc"] == ["body", 1]
    # the query is checked too, once the body failed
    errs = errors_of(call("POST", "/items?dry=perhaps", content=b'{"name":""}'))
    assert [e["loc"][0] for e in errs] == ["body", "query"]


def test_malformed_json_stays_400():
    r = call("POST", "/items", content=b'{"name":')
    assert r.status_code == 400 and "malformed JSON" in r.json()["detail"]
    assert call("POST", "/items", content=b"").status_code == 400


@pytest.mark.parametrize("content_type, status", [
    (None, 200), ("application/json", 200), ("application/json; charset=utf-8", 200), ("Application/JSON", 200),
    ("application/merge-patch+json", 200), ("application/vnd.api+json;v=2", 200),
    ("text/plain", 415), ("application/x-www-form-urlencoded", 415), ("application/jsonx", 415),
    ("text/json", 415), ("", 415)])
def test_a_declared_json_body_reads_json_media_types_only(content_type, status):
    """As FastAPI: no Content-Type is read as JSON; another media type is refused (415 here, where
    FastAPI answers 422), so a form post is never taken for JSON by accident."""
    headers = {} if content_type is None else {"content-type": content_type}
    r = call("POST", "/items", content=b'{"name":"a"}', headers=headers)
    assert r.status_code == status, r.text
    if status == 415:
        assert r.headers["content-type"] == "application/problem+json"
        assert "expected application/json" in r.json()["detail"]


# -- forms ---------------------------------------------------------------------------------------------
def test_form_fields_lists_and_aliases():
    r = call("POST", "/fields", data={"title": "t", "n": ["1", "2"], "the-age": "7"})
    assert r.json() == {"title": "t", "n": [1, 2], "age": 7}
    errs = errors_of(call("POST", "/fields", data={"n": ["1", "x"], "the-age": "old"}))
    assert {tuple(e["loc"]) for e in errs} == {("form", "title"), ("form", "n", 1), ("form", "the-age")}
    errs = errors_of(call("POST", "/fields", files={"title": ("t.txt", b"x")}))
    assert errs[0]["loc"] == ["form", "title"] and "file" in errs[0]["msg"]


def test_files_bind_by_name_and_formdata_whole():
    r = call("POST", "/upload", files=[("doc", ("a.txt", b"1")), ("more", ("b.txt", b"2")), ("more", ("c.txt", b"3"))],
             data={"note": "n"})
    assert r.json() == {"doc": "a.txt", "more": ["b.txt", "c.txt"], "keys": ["note", "doc", "more"]}
    errs = errors_of(call("POST", "/upload", data={"doc": "text, not a file"}))
    assert errs[0]["loc"] == ["form", "doc"] and "expected a file" in errs[0]["msg"]
    assert errors_of(call("POST", "/upload", data={"x": "1"}))[0] == {"loc": ["form", "doc"], "msg": "required",
                                                                      "type": "missing"}


def test_inputs_a_browser_sends_empty_count_as_absent():
    """An HTML form posts ``age=`` for a number input left blank and a file part with ``filename=""``
    and no bytes for a file input left empty: as FastAPI, the parameter takes its default (a required
    one is 422 missing), in a form model too."""

    class Profile(msgspec.Struct):
        name: str
        age: int | None = None
        photos: list[UploadFile] = []

    app = App()

    @app.post("/search")
    async def search(q: Form[str] = "all", age: Form[int | None] = None, photo: UploadFile | None = None,
                     extra: list[UploadFile] = []):
        return {"q": q, "age": age, "photo": None if photo is None else photo.filename, "extra": len(extra)}

    @app.post("/upload")
    async def upload(photo: UploadFile):
        return {"photo": photo.filename}

    @app.post("/profile")
    async def profile(p: Form[Profile]):
        return {"name": p.name, "age": p.age, "photos": len(p.photos)}

    def browser_form(*parts):  # what a browser posts: a file input left empty is a part with filename=""
        body = b""
        for name, value in parts:
            extra = '; filename=""\r\nContent-Type: application/octet-stream' if value is None else ""
            body += f'--B\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n{value or ""}\r\n'.encode()
        return {"content": body + b"--B--\r\n", "headers": {"content-type": "multipart/form-data; boundary=B"}}

    r = call("POST", "/search", app=app, **browser_form(("q", ""), ("age", ""), ("photo", None), ("extra", None)))
    assert r.json() == {"q": "all", "age": None, "photo": None, "extra": 0}
    r = call("POST", "/search", app=app, data={"q": "x", "age": "3"}, files=[("photo", ("a.png", b"1", "image/png"))])
    assert r.json() == {"q": "x", "age": 3, "photo": "a.png", "extra": 0}
    assert errors_of(call("POST", "/upload", app=app, **browser_form(("photo", None))))[0] == {
        "loc": ["form", "photo"], "msg": "required", "type": "missing"}
    r = call("POST", "/profile", app=app, **browser_form(("name", "ada"), ("age", ""), ("photos", None)))
    assert r.json() == {"name": "ada", "age": None, "photos": 0}


def test_form_model_errors_locate_the_field():
    app = forms_app.create_app()
    errs = errors_of(call("POST", "/signup", app=app, data={"name": "a", "age": "x", "evil": "1"}))
    assert errs[0]["loc"] in (["form", "age"], ["form", "evil"])
    errs = errors_of(call("POST", "/signup", app=app, data={"age": "3"}))
    assert errs == [{"loc": ["form", "name"], "msg": "Object missing required field `name`", "type": "missing"}]
    errs = errors_of(call("POST", "/signup", app=app, data={"name": "a", "age": "3", "avatar": "text"}))
    assert errs[0]["loc"] == ["form", "avatar"]


def test_optional_body_form_fields_and_files_take_their_defaults_when_nothing_is_sent():
    """As FastAPI: a POST without a body gives an optional JSON body, optional form fields and an optional
    upload their defaults (a required one is still refused); a body without a Content-Type is still 415."""
    app = App()

    @app.post("/note")
    async def note(body: Item | None = None):
        return {"body": None if body is None else body.name}

    @app.post("/avatar")
    async def avatar(file: UploadFile | None = None, caption: Form[str] = "none"):
        return {"file": None if file is None else file.filename, "caption": caption}

    @app.post("/title")
    async def title(title: Form[str]):
        return {"title": title}

    assert call("POST", "/note", app=app).json() == {"body": None}
    assert call("POST", "/note", app=app, json={"name": "a"}).json() == {"body": "a"}
    assert call("POST", "/avatar", app=app).json() == {"file": None, "caption": "none"}
    assert call("POST", "/avatar", app=app, files={"file": ("a.png", b"x")}).json() == {"file": "a.png",
                                                                                      "caption": "none"}
    assert errors_of(call("POST", "/title", app=app)) == [{"loc": ["form", "title"], "msg": "required",
                                                          "type": "missing"}]
    assert call("POST", "/title", app=app, content=b"title=x").status_code == 415
    assert call("POST", "/items", content=b"").status_code == 400  # a required body stays 400


def test_the_request_subclass_and_background_tasks_bind():
    assert call("GET", "/request").json() == {"same_request": True, "tasks_shared": True}


# -- registration ----------------------------------------------------------------------------------------
class Unknown:
    pass


@pytest.mark.parametrize("annotation,words", [
    (Unknown, ["Unknown"]),
    (dict, ["dict"]),
    (list[Unknown], ["Unknown"]),
    (Header[Unknown], ["header"]),
    (Cookie[list[str]], ["cookie"]),
    (int | str, ["int | str"]),
])
def test_unsupported_annotations_are_refused_when_the_app_compiles(annotation, words):
    app = App()

    async def handler(thing):
        return 1

    handler.__annotations__ = {"thing": annotation}
    app.get("/x")(handler)
    with pytest.raises(TypeError) as e:
        app.compile()
    msg = str(e.value)
    assert "handler" in msg and "'thing'" in msg and all(w in msg for w in words), msg


def test_a_di_token_is_not_mistaken_for_an_unknown_annotation():
    c = Container()
    c.register(Unknown)
    app = App(container=c)

    @app.get("/x")
    async def handler(thing: Unknown):
        return type(thing).__name__

    assert call("GET", "/x", app=app).text == "Unknown"


def test_a_json_body_and_a_form_together_are_refused():
    app = App()

    @app.post("/x")
    async def handler(body: Item, title: Form[str]):
        return 1

    with pytest.raises(TypeError, match="not both"):
        app.compile()


def test_describe_plan_for_openapi():
    app = make_app().compile()
    plans = {r.pattern: describe_plan(r.endpoint.plan) for r in app.router.routes}
    h = {d["name"]: d for d in plans["/headers"]}
    assert h["x_api_key"] == {"location": "header", "name": "x_api_key", "alias": "x-api-key", "type": str,
                              "required": True, "default": None}
    assert h["agent"]["alias"] == "user-agent" and h["x_list"]["type"] == list[int]
    q = {d["name"]: d for d in plans["/query"]}
    assert q["page_size"]["alias"] == "page-size" and q["page_size"]["default"] == 20
    assert q["ratio"]["type"] == (float | None) and q["ratio"]["required"] is False
    assert [d["location"] for d in plans["/upload"]] == ["file", "file", "formdata"]
    assert [d["location"] for d in plans["/request"]] == ["request", "background", "background"]
    assert plans["/items"][0]["location"] == "body" and plans["/items"][0]["type"] is Item
    signup = describe_plan(forms_app.create_app().compile().router.match("POST", "/signup").route.endpoint.plan)
    assert [(d["location"], d["name"], d["required"]) for d in signup] == [
        ("form", "name", True), ("form", "age", True), ("form", "tags", False), ("file", "avatar", False)]


# -- the RSGI request mirrors query_list and cookies (real granian) --------------------------------------
@pytest.mark.parametrize("interface", ["rsgi", "asgi"])
def test_query_list_and_cookies_on_granian(interface):
    with running_server("--app", "forms_app:app", "--interface", interface) as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            r = c.get("/params?tag=1&tag=2", headers=[("x-token", "t"), ("cookie", "session=s1; broken; b=2"),
                                                      ("x-multi", "a"), ("x-multi", "b, c")])
            assert r.status_code == 200, r.text
            assert r.json() == {"token": "t", "session": "s1", "tag": [1, 2], "multi": ["a", "b", "c"],
                                "query_list": ["1", "2"], "cookies": {"session": "s1", "b": "2"}}
            r = c.get("/params?tag=x")
            assert r.status_code == 422
            assert {tuple(e["loc"]) for e in r.json()["errors"]} == {("header", "x-token"), ("query", "tag", 0)}
