"""rpc_app.openrpc: the OpenRPC document of a registry, checked against the official meta-schema.

The meta-schema comes from the npm package @open-rpc/meta-schema, named by the environment
variable OPENRPC_META_SCHEMA: either a JSON file or the package's index.js, which holds the
schema as a JSON object literal (``exports.openrpcDocument = {...}``; 1.14.9 ships no .json).
Its "JSONSchema" definition points at https://meta.json-schema.tools (npm
@json-schema-tools/meta-schema): named by JSON_SCHEMA_TOOLS_META_SCHEMA when set, otherwise
stood in for by the draft-07 meta-schema bundled with jsonschema, which it is a copy of.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import os
from typing import Any, Literal, Optional, TypedDict, Union

import orjson
import pytest

from rpc_app import Registry, RpcContext
from rpc_app import openrpc
from rpc_app.methods import build_registry
from rpc_app.registry import collect_marked, rpc_method

JSON_SCHEMA_TOOLS = "https://meta.json-schema.tools"


# -- the meta-schema ------------------------------------------------------------------

def _load_schema_file(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return json.loads(text)
    # index.js: decode the first JSON value after the export (raw_decode stops at its end)
    start = text.index("{", text.index("openrpcDocument ="))
    return json.JSONDecoder().raw_decode(text, start)[0]


def _npm_file(env: str, package_path: str) -> str | None:
    """A file named by ``env``, or else found in the node_modules next to $NPM_PACKAGE_JSON (the Bazel
    target passes @npm's package.json)."""
    if os.environ.get(env):
        return os.environ[env]
    pkg = os.environ.get("NPM_PACKAGE_JSON")
    if pkg:
        return os.path.join(os.path.dirname(os.path.abspath(pkg)), "node_modules", package_path)
    return None


def _json_schema_tools_meta() -> dict:
    path = _npm_file("JSON_SCHEMA_TOOLS_META_SCHEMA", "@json-schema-tools/meta-schema/schema.json")
    if path:
        return _load_schema_file(path)
    from jsonschema import Draft7Validator
    meta = copy.deepcopy(Draft7Validator.META_SCHEMA)
    meta.pop("$id", None)  # so that its "#/..." refs resolve inside this resource
    # the one path of json-schema-tools' layout that the OpenRPC meta-schema refers to
    meta["definitions"]["JSONSchemaObject"] = {"properties": {"$ref": meta["properties"]["$ref"]}}
    return meta


@pytest.fixture(scope="module")
def validator():
    path = _npm_file("OPENRPC_META_SCHEMA", "@open-rpc/meta-schema/index.js")
    if not path:
        pytest.skip("set NPM_PACKAGE_JSON (third_party/npm after npm ci) or OPENRPC_META_SCHEMA")
    from jsonschema import Draft7Validator
    from referencing import Registry as RefRegistry
    from referencing.jsonschema import DRAFT7

    meta = _load_schema_file(path)
    assert meta["properties"]["openrpc"]["enum"][0] == "1.3.2", "not the OpenRPC 1.3.x meta-schema"
    tools = DRAFT7.create_resource(_json_schema_tools_meta())
    refs = RefRegistry().with_resources([(JSON_SCHEMA_TOOLS, tools), (JSON_SCHEMA_TOOLS + "/", tools)])
    # Its $schema names json-schema-tools' meta-schema, a draft-07 dialect ("definitions",
    # "additionalItems"), so Draft 7 is the validator that matches.
    Draft7Validator.check_schema(meta)
    return Draft7Validator(meta, registry=refs)


def assert_valid(validator, doc):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors)


# -- a representative registry --------------------------------------------------------

class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(TypedDict):
    x: float
    y: float


class Options(TypedDict, total=False):
    verbose: bool


@dataclasses.dataclass
class User:
    id: int
    name: str
    tags: list[str] = dataclasses.field(default_factory=list)


def representative() -> Registry:
    reg = Registry()

    @reg.method()
    def add(a: int, b: int = 2) -> int:
        """Add two integers.

        The second one defaults to 2.
        """
        return a + b

    @reg.method()
    async def whoami(ctx: RpcContext, prefix: str = "") -> str:
        """Who is calling."""
        return prefix + str(ctx.user)

    @reg.method("users.find")
    async def find(name: Optional[str], limit: int | None = None, *, color: Color = Color.RED) -> list[User]:
        return []

    @reg.method()
    def search(query: str, *, page: int, size: int = 10) -> dict[str, float]:
        return {}

    @reg.method()
    def scale(p: Point, factor: Union[int, float], opts: Options = None, /) -> Point:  # noqa: RUF013
        return p

    @reg.method()
    def pick(mode: Literal["fast", "slow"], ids: list[int], weights: dict[str, float], user: User):
        return None

    @reg.method()
    def anything(value: Any = None, other=None, tup: tuple[int, ...] = (1, 2)):
        return value

    @reg.method()
    def varargs(first, *rest, **extra):
        return first

    @reg.method(blocking=True)
    def report(day: str) -> None:
        return None

    @reg.method()
    def now():
        return 0

    return reg


class Consumer:
    @rpc_method()
    def add(self, a: int, b: int) -> int:
        """Consumer-side add."""
        return a + b

    @rpc_method("profile.get")
    async def profile(self, ctx: RpcContext, full: bool = False) -> dict:
        return {}

    @rpc_method(blocking=True)
    def slow(self, ctx, seconds: float) -> None:
        return None


def methods(doc) -> dict:
    return {m["name"]: m for m in doc["methods"]}


def params(doc, name) -> list[tuple]:
    return [(p["name"], p["required"], p["schema"]) for p in methods(doc)[name]["params"]]


# -- validation against the meta-schema -------------------------------------------------

def test_representative_document_validates(validator):
    doc = openrpc.document(representative(), title="demo", version="2.1.0", description="A demo service.",
                           servers=[{"name": "local", "url": "ws://127.0.0.1:8082/"}])
    assert_valid(validator, doc)
    assert doc["servers"] == [{"name": "local", "url": "ws://127.0.0.1:8082/"}]
    assert doc["info"] == {"title": "demo", "version": "2.1.0", "description": "A demo service."}


def test_consumer_document_validates(validator):
    assert_valid(validator, openrpc.document(collect_marked(Consumer)))


def test_example_methods_and_empty_registry_validate(validator):
    assert_valid(validator, openrpc.document(build_registry()))
    assert_valid(validator, openrpc.document(Registry()))


def _break_without_name(doc):
    del doc["methods"][0]["name"]


def _break_params_not_list(doc):
    doc["methods"][0]["params"] = {"a": {"type": "integer"}}


def _break_param_structure(doc):
    doc["methods"][0]["paramStructure"] = "by-magic"


def _break_param_schema(doc):
    doc["methods"][0]["params"][0]["schema"] = {"type": "integr"}


def _break_version(doc):
    doc["openrpc"] = "9.9.9"


def _break_unknown_key(doc):
    doc["methods"][0]["returns"] = {}


@pytest.mark.parametrize("breaker", [_break_without_name, _break_params_not_list, _break_param_structure,
                                     _break_param_schema, _break_version, _break_unknown_key],
                         ids=lambda f: f.__name__.removeprefix("_break_"))
def test_broken_document_fails_validation(validator, breaker):
    doc = copy.deepcopy(openrpc.document(representative()))
    assert_valid(validator, doc)
    breaker(doc)
    assert list(validator.iter_errors(doc)), f"{breaker.__name__}: the meta-schema accepted a broken document"


# -- contents ---------------------------------------------------------------------------

def test_document_shape_and_order():
    doc = openrpc.document(representative())
    assert doc["openrpc"] == "1.3.2"
    assert doc["info"] == {"title": "rpc_app", "version": "1.0.0"}
    assert "servers" not in doc
    names = [m["name"] for m in doc["methods"]]
    assert names == sorted(names) and "users.find" in names and len(names) == 10
    assert orjson.loads(orjson.dumps(doc)) == doc  # plain JSON data, as the engine will encode it


def test_params_defaults_and_docstring():
    m = methods(openrpc.document(representative()))["add"]
    assert params(openrpc.document(representative()), "add") == [
        ("a", True, {"type": "integer"}), ("b", False, {"type": "integer", "default": 2})]
    assert m["summary"] == "Add two integers."
    assert m["description"] == "The second one defaults to 2."
    assert m["result"] == {"name": "result", "schema": {"type": "integer"}}
    assert m["paramStructure"] == "either"


def test_context_parameter_is_not_a_param():
    doc = openrpc.document(representative())
    assert params(doc, "whoami") == [("prefix", False, {"type": "string", "default": ""})]
    assert methods(doc)["whoami"]["summary"] == "Who is calling."
    assert "description" not in methods(doc)["whoami"]
    assert "summary" not in methods(doc)["users.find"]


def test_consumer_methods_lose_self_and_ctx():
    doc = openrpc.document(collect_marked(Consumer))
    assert [m["name"] for m in doc["methods"]] == ["add", "profile.get", "slow"]
    assert params(doc, "add") == [("a", True, {"type": "integer"}), ("b", True, {"type": "integer"})]
    assert params(doc, "profile.get") == [("full", False, {"type": "boolean", "default": False})]
    assert params(doc, "slow") == [("seconds", True, {"type": "number"})]  # ctx by name, no annotation
    assert methods(doc)["add"]["summary"] == "Consumer-side add."
    assert methods(doc)["profile.get"]["result"]["schema"] == {"type": "object"}
    assert methods(doc)["slow"]["x-blocking"] is True
    # a required param after a positional-or-keyword ctx cannot go by position
    assert methods(doc)["slow"]["paramStructure"] == "by-name"
    assert methods(doc)["profile.get"]["paramStructure"] == "either"


def test_param_structure():
    m = methods(openrpc.document(representative()))
    assert m["scale"]["paramStructure"] == "by-position"   # all positional-only
    assert m["search"]["paramStructure"] == "by-name"      # keyword-only required (page)
    assert m["users.find"]["paramStructure"] == "either"   # keyword-only, but optional
    assert m["now"]["paramStructure"] == "either"          # no params: any form
    assert m["now"]["params"] == []


def test_annotation_schemas():
    doc = openrpc.document(representative())
    find = dict((n, (r, s)) for n, r, s in params(doc, "users.find"))
    assert find["name"] == (True, {"anyOf": [{"type": "string"}, {"type": "null"}]})
    assert find["limit"] == (False, {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None})
    assert find["color"] == (False, {"title": "Color", "enum": ["red", "green"], "default": "red"})
    user = {"title": "User", "type": "object", "required": ["id", "name"],
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                           "tags": {"type": "array", "items": {"type": "string"}}}}
    assert methods(doc)["users.find"]["result"]["schema"] == {"type": "array", "items": user}

    assert params(doc, "pick") == [
        ("mode", True, {"enum": ["fast", "slow"]}),
        ("ids", True, {"type": "array", "items": {"type": "integer"}}),
        ("weights", True, {"type": "object", "additionalProperties": {"type": "number"}}),
        ("user", True, user),
    ]
    point = {"title": "Point", "type": "object", "required": ["x", "y"],
             "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}
    assert params(doc, "scale") == [
        ("p", True, point),
        ("factor", True, {"anyOf": [{"type": "integer"}, {"type": "number"}]}),
        ("opts", False, {"title": "Options", "type": "object", "properties": {"verbose": {"type": "boolean"}},
                         "default": None}),
    ]
    assert methods(doc)["search"]["result"]["schema"] == {"type": "object",
                                                           "additionalProperties": {"type": "number"}}
    assert params(doc, "anything") == [
        ("value", False, {"default": None}), ("other", False, {"default": None}),
        ("tup", False, {"type": "array", "items": {"type": "integer"}, "default": [1, 2]})]
    assert methods(doc)["anything"]["result"] == {"name": "result", "schema": {}}
    assert methods(doc)["report"]["result"]["schema"] == {"type": "null"}


def test_variadic_params_left_out_and_flagged():
    m = methods(openrpc.document(representative()))
    assert [p["name"] for p in m["varargs"]["params"]] == ["first"]
    assert m["varargs"]["x-var-positional"] is True and m["varargs"]["x-var-keyword"] is True
    assert "x-var-positional" not in m["add"] and "x-blocking" not in m["add"]
    assert m["report"]["x-blocking"] is True


@pytest.mark.parametrize("tp, schema", [
    (bool, {"type": "boolean"}),
    (float, {"type": "number"}),
    (None, {"type": "null"}),
    (list, {"type": "array"}),
    (dict, {"type": "object"}),
    (tuple[int, str], {"type": "array", "items": [{"type": "integer"}, {"type": "string"}],
                       "minItems": 2, "maxItems": 2, "additionalItems": False}),
    (Union[int, str, None], {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
    (Literal[1, Color.GREEN, b"not json"], {"enum": [1, "green"]}),
    (set[int], {"description": "set"}),
    (complex, {"description": "complex"}),
    ("Unresolved", {"description": "Unresolved"}),
])
def test_schema_of(tp, schema):
    assert openrpc.schema_of(tp) == schema


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree]


def test_recursive_dataclass_stops():
    assert openrpc.schema_of(Tree) == {
        "title": "Tree", "type": "object", "required": ["value", "children"],
        "properties": {"value": {"type": "integer"},
                       "children": {"type": "array", "items": {"description": "Tree"}}}}


def test_local_class_with_unresolvable_field():
    @dataclasses.dataclass
    class Local:
        n: int
        parent: Local | None  # local name: get_type_hints cannot see it

    s = openrpc.schema_of(Local)
    assert s["properties"] == {"n": {"type": "integer"}, "parent": {"description": "Local | None"}}


def test_unresolvable_annotation_falls_back():
    reg = Registry()

    @reg.method()
    def f(a: NoSuchType, b: int = 1) -> AlsoMissing:  # noqa: F821 (a string: annotations are postponed)
        return a

    m = methods(openrpc.document(reg))["f"]
    assert [(p["name"], p["schema"]) for p in m["params"]] == [
        ("a", {"description": "NoSuchType"}), ("b", {"type": "integer", "default": 1})]
    assert m["result"]["schema"] == {"description": "AlsoMissing"}


def test_cache_until_a_method_is_added():
    reg = representative()
    first = openrpc.document(reg)
    assert openrpc.document(reg) is first

    @reg.method()
    def late(x: int) -> int:
        return x

    second = openrpc.document(reg)
    assert second is not first and "late" in methods(second) and "late" not in methods(first)
    assert openrpc.document(reg) is second
    other = openrpc.document(reg, title="other")  # other arguments: another document
    assert other is not second and other["info"]["title"] == "other"
    assert openrpc.document(reg.copy()) is not openrpc.document(reg)
