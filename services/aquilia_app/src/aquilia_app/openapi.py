"""OpenAPI 3.1 from the routes: paths from the patterns, parameters and bodies from the handlers'
binding plans, schemas from the Python types (``msgspec.json.schema_components``), and a docs page.

    app.enable_openapi(title="Items", version="1.2.0")   # /openapi.json and /docs

The document is built once, on its first request (after start-up, when every plan exists).  The docs
page is Swagger UI from the ``swagger-ui-bundle`` package, served by ``StaticFiles`` (no CDN).
"""
from __future__ import annotations

import inspect
import re
import typing

import msgspec

from .controllers import describe_plan, return_annotation
from .patterns import Param
from .requests import Request
from .responses import CT_HTML, CT_JSON, Response, json_bytes

__all__ = ["openapi_document", "enable_openapi"]

_PARAM_TYPES = {
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "uuid": {"type": "string", "format": "uuid"},
    "slug": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
    "str": {"type": "string"},
    "path": {"type": "string"},
}
_NUMERIC = ("int", "float")
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
_NOT_MODELLED = ("request", "dependency", "background", "websocket")
_PROBLEM = {"type": "object", "required": ["type", "title", "status"], "properties": {
    "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
    "detail": {"type": "string"}, "errors": {"type": "array", "items": {"type": "object"}}}}


def _path_param_schema(p: Param) -> dict:
    s = dict(_PARAM_TYPES[p.type])
    for key, raw in p.constraints:
        if key in ("min", "max"):
            if p.type in _NUMERIC:
                s["minimum" if key == "min" else "maximum"] = float(raw) if p.type == "float" else int(raw)
            else:
                s["minLength" if key == "min" else "maxLength"] = int(raw)
        elif key in ("re", "regex"):  # the router matches the whole segment; a JSON Schema pattern searches
            s["pattern"] = f"^(?:{raw})$"
        elif key == "in":  # the values as the parameter's type: "1" is no integer
            cast = int if p.type == "int" else float if p.type == "float" else str
            s["enum"] = [cast(v) for v in raw.split(",")]
    return s


def _unique_id(op_id: str, path: str, used: set) -> str:
    """``op_id``, or - when another operation has it already (two modules' ``index`` handlers, one
    handler or group under two paths) - ``op_id`` with its path (FastAPI's ids hold the path too)."""
    if op_id in used:
        base = re.sub(r"\W+", "_", f"{op_id}_{path}").strip("_")
        op_id, n = base, 2
        while op_id in used:
            op_id, n = f"{base}_{n}", n + 1
    used.add(op_id)
    return op_id


def _openapi_path(variant: tuple) -> str:
    return "/" + "/".join(seg if isinstance(seg, str) else "{" + seg.name + "}" for seg in variant)


class _Schemas:
    """Collects the Python types met, then converts them all at once (shared components, $refs)."""

    def __init__(self):
        self.types: list = []
        self.slots: list = []  # (dict to fill, key, index into types)
        self.problem_ref: dict = {}  # the problem+json component's $ref, once its name is known (``resolve``)
        self.validation = {"description": "Validation failed",
                           "content": {"application/problem+json": {"schema": self.problem_ref}}}

    def put(self, target: dict, key: str, tp) -> None:
        try:
            msgspec.json.schema(tp)  # can msgspec describe it?  (Response, Any-less objects: no)
        except (TypeError, ValueError):
            target[key] = {}
            return
        self.slots.append((target, key, len(self.types)))
        self.types.append(tp)

    def resolve(self) -> dict:
        schemas, components = msgspec.json.schema_components(self.types, ref_template="#/components/schemas/{name}")
        for target, key, i in self.slots:
            target[key] = schemas[i]
        name = "Problem"  # the app's own model may have that name: ours then takes another
        while name in components:
            name = "HTTP" + name
        components[name] = _PROBLEM
        self.problem_ref["$ref"] = f"#/components/schemas/{name}"
        return components


def _docs_of(route) -> dict | None:
    return route.meta.get("openapi") if route.meta else None


def _operation(route, method: str, ep, schemas: _Schemas, path_params: dict) -> dict:
    fn = ep.handler
    docs = _docs_of(route) or {}
    summary, _, description = (inspect.getdoc(fn) or "").partition("\n")
    summary, description = docs.get("summary") or summary.strip(), docs.get("description") or description.strip()
    base = route.name or fn.__qualname__.replace("<locals>.", "")
    op: dict = {"operationId": re.sub(r"\W+", "_", f"{base}_{method.lower()}").strip("_")}
    if summary:
        op["summary"] = summary
    if description:
        op["description"] = description
    tags = [getattr(ep.owner, "tag", None) or ep.owner.__name__] if ep.owner is not None else []
    tags += [t for t in docs.get("tags", ()) if t not in tags]
    if tags:
        op["tags"] = tags
    if docs.get("deprecated"):
        op["deprecated"] = True
    params, body, form = [], None, {}
    for d in describe_plan(ep.plan):
        loc = d["location"]
        if loc in _NOT_MODELLED:
            continue
        if loc == "path":
            params.append(path_params[d["name"]])
        elif loc in ("query", "header", "cookie"):
            p = {"name": d.get("alias") or d["name"], "in": loc, "required": d["required"]}
            schemas.put(p, "schema", d["type"])
            params.append(p)
        elif loc == "body":
            body = {"required": d["required"], "content": {"application/json": {}}}
            schemas.put(body["content"]["application/json"], "schema", d["type"])
        elif loc in ("form", "file"):
            form[d.get("alias") or d["name"]] = d
        elif loc == "formdata":  # the whole form, fields not declared
            body = {"required": True, "content": {k: {"schema": {"type": "object"}} for k in _FORM_TYPES}}
    if params:
        op["parameters"] = params
    if form:
        op["requestBody"] = _form_body(form, schemas)
    elif body is not None:
        op["requestBody"] = body
    ok = {"description": "OK" if ep.status < 300 else "Success"}
    rt = return_annotation(fn)
    if rt is not None and ep.status != 204:
        ok["content"] = {"application/json": {}}
        schemas.put(ok["content"]["application/json"], "schema", rt)
    op["responses"] = {str(ep.status): ok}
    if params or body is not None or form:
        op["responses"]["422"] = schemas.validation
    return op


def _form_body(fields: dict, schemas: _Schemas) -> dict:
    props: dict = {}
    required = []
    has_file = False
    for name, d in fields.items():
        if d["location"] == "file":
            has_file = True
            many = typing.get_origin(d["type"]) is list
            one = {"type": "string", "contentMediaType": "application/octet-stream"}
            props[name] = {"type": "array", "items": one} if many else one
        else:
            schemas.put(props, name, d["type"])
        if d["required"]:
            required.append(name)
    schema: dict = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    kinds = ["multipart/form-data"] if has_file else _FORM_TYPES
    return {"required": bool(required), "content": {k: {"schema": schema} for k in kinds}}


def openapi_document(app, *, title: str, version: str, description: str | None = None,
                     servers: list | None = None) -> dict:
    """The OpenAPI 3.1 document of ``app``'s HTTP routes (compiled first if needed); a handler with
    ``include_in_schema=False`` (mounts, the docs routes) is left out."""
    app.compile()
    schemas = _Schemas()
    paths: dict = {}
    used_ids: set = set()  # operationIds are unique in a document (OpenAPI 3.1, 4.8.10)
    for route in app.router.routes:
        ep = route.endpoint
        if ep is None or ep.handler is None or not (_docs_of(route) or {}).get("include_in_schema", True):
            continue
        for k, variant in enumerate(route.parsed.variants):
            path_params = {s.name: {"name": s.name, "in": "path", "required": True,
                                    "schema": _path_param_schema(s)} for s in variant if isinstance(s, Param)}
            missing = {n: {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                       for n in route.parsed.params if n not in path_params}
            item = paths.setdefault(_openapi_path(variant), {})
            for method in route.methods:
                if method != "HEAD":
                    ops = _operation(route, method, ep, schemas, {**missing, **path_params})
                    if k:  # each form of an optional part is an operation of its own
                        ops["operationId"] += f"_{k}"
                    if missing:  # an optional part absent in this variant: its parameters are not in the path
                        ops["parameters"] = [p for p in ops.get("parameters", ()) if p["name"] not in missing]
                    ops["operationId"] = _unique_id(ops["operationId"], _openapi_path(variant), used_ids)
                    item[method.lower()] = ops
    components = schemas.resolve()
    info: dict = {"title": title, "version": version}
    if description:
        info["description"] = description
    doc: dict = {"openapi": "3.1.0", "info": info, "paths": paths, "components": {"schemas": components}}
    if servers:
        doc["servers"] = servers
    return doc


_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({{url: "{spec}", dom_id: "#swagger-ui"}});</script>
</body></html>
"""


def enable_openapi(app, *, title: str = "API", version: str = "1.0.0", description: str | None = None,
                   openapi_path: str = "/openapi.json", docs_path: str | None = "/docs",
                   servers: list | None = None) -> None:
    """Serve the document at ``openapi_path`` and, unless ``docs_path`` is None, Swagger UI there.
    Behind a root path (a proxy's prefix, a mounting app) the page loads the document and its assets
    under that prefix, and the document says ``servers: [{"url": root_path}]`` unless ``servers`` is
    given (as FastAPI does), so "Try it out" calls the right URLs."""
    from html import escape

    cache: dict = {}  # root path -> the document's bytes (a server has one or two root paths)

    @app.get(openapi_path, name="openapi", include_in_schema=False)
    async def openapi_json(request: Request):
        root = request.root_path
        body = cache.get(root)
        if body is None:
            doc = openapi_document(app, title=title, version=version, description=description,
                                   servers=servers or ([{"url": root}] if root else None))
            body = cache[root] = json_bytes(doc)
        return Response(body, 200, None, CT_JSON)


    if docs_path is None:
        return
    from swagger_ui_bundle import swagger_ui_path

    from .files import StaticFiles

    assets = docs_path.rstrip("/") + "/assets"
    pages: dict = {}  # root path -> the page

    @app.get(docs_path, name="docs", include_in_schema=False)
    async def docs(request: Request):
        root = request.root_path
        page = pages.get(root)
        if page is None:
            page = pages[root] = _DOCS_PAGE.format(title=escape(title), assets=escape(root + assets),
                                                   spec=escape(root + openapi_path)).encode()
        return Response(page, 200, None, CT_HTML)

    # the package's own files, trusted: installed trees may be symlink farms (Bazel runfiles)
    app.mount(assets, StaticFiles(str(swagger_ui_path), follow_symlink=True, max_age=86400))
