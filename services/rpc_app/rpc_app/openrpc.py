"""OpenRPC 1.3.2 service description of a ``Registry``: the answer to ``rpc.discover``.

``document(registry)`` describes every registered method (params, result, docstring) with
JSON Schemas derived from the Python annotations. The document is cached per registry and
rebuilt only when the registry gains methods.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import sys
import types
import typing
import weakref
from typing import Any

from .registry import MethodSpec, Registry

OPENRPC_VERSION = "1.3.2"

_SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}
_UNION_TYPES = (typing.Union, types.UnionType)

# registry -> (key, document). Weak keys: a dropped registry takes its document with it.
_cache: "weakref.WeakKeyDictionary[Registry, tuple[tuple, dict]]" = weakref.WeakKeyDictionary()


def document(registry: Registry, *, title: str = "rpc_app", version: str = "1.0.0",
             description: str | None = None, servers: list[dict] | None = None) -> dict:
    """The OpenRPC document of ``registry``. Shared between calls: treat it as read-only."""
    # A registry only grows (add() refuses duplicates, nothing removes), so its length is
    # a version number; the other arguments are part of the key too.
    key = (len(registry), title, version, description, repr(servers))
    hit = _cache.get(registry)
    if hit is not None and hit[0] == key:
        return hit[1]
    doc = _build(registry, title, version, description, servers)
    _cache[registry] = (key, doc)
    return doc


def _build(registry, title, version, description, servers) -> dict:
    info = {"title": title, "version": version}
    if description:
        info["description"] = description
    doc: dict = {"openrpc": OPENRPC_VERSION, "info": info}
    if servers:
        doc["servers"] = list(servers)
    doc["methods"] = [method_object(spec) for spec in sorted(registry, key=lambda s: s.name)]
    return doc


# -- methods ------------------------------------------------------------------------

def method_object(spec: MethodSpec) -> dict:
    """The OpenRPC Method Object of one registered method."""
    sig = inspect.signature(spec.func)
    hints = _hints(spec.func, getattr(inspect.unwrap(spec.func), "__globals__", {}))
    params = _client_params(spec, sig)
    m: dict = {"name": spec.name}
    m.update(_doc_fields(spec.func))
    m["params"] = [_param_descriptor(p, hints) for p in params]
    m["paramStructure"] = _param_structure(spec, params)
    m["result"] = {"name": "result", "schema": schema_of(hints.get("return", sig.return_annotation))}
    if spec.blocking:
        m["x-blocking"] = True  # runs in the thread pool: a hint for clients about latency
    # *args / **kwargs are left out of "params": a Content Descriptor names one value and
    # OpenRPC has no variadic form. Extensions say that extra params are accepted.
    if spec.var_positional:
        m["x-var-positional"] = True
    if spec.var_keyword:
        m["x-var-keyword"] = True
    return m


def _hints(obj, globalns: dict) -> dict:
    """Resolved annotations of a function or class; raw ones where they cannot be resolved."""
    try:
        return typing.get_type_hints(obj)
    except Exception:
        pass
    # One unresolvable name (e.g. imported under TYPE_CHECKING) must not cost the others.
    raw = getattr(obj, "__annotations__", None)
    if not isinstance(raw, dict):
        return {}
    return {name: _resolve(ann, globalns) for name, ann in raw.items()}


def _resolve(ann, globalns: dict):
    holder = types.SimpleNamespace(__annotations__={"a": ann})
    try:
        return typing.get_type_hints(holder, globalns)["a"]
    except Exception:
        return ann


def _client_params(spec: MethodSpec, sig: inspect.Signature) -> list[inspect.Parameter]:
    """The params a client sends: no owner, no RpcContext, no *args/**kwargs."""
    params = list(sig.parameters.values())
    if spec.bind_owner:
        params = params[1:]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p for p in params if p.name != spec.ctx_param and p.kind not in variadic]


def _doc_fields(func) -> dict:
    doc = inspect.getdoc(func)
    if not doc:
        return {}
    first, _, rest = doc.partition("\n")
    out = {"summary": first.strip()}
    if rest.strip():
        out["description"] = rest.strip()
    return out


def _param_descriptor(p: inspect.Parameter, hints: dict) -> dict:
    schema = schema_of(hints.get(p.name, p.annotation))
    required = p.default is p.empty
    if not required:
        ok, value = _json_value(p.default)
        if ok:
            schema["default"] = value
    return {"name": p.name, "required": required, "schema": schema}


def _param_structure(spec: MethodSpec, params: list[inspect.Parameter]) -> str:
    # kw_required also holds required params after a positional-or-keyword RpcContext,
    # which cannot be given by position either.
    if spec.kw_required:
        return "by-name"
    # A method without params accepts both forms (or none), hence "either".
    if params and all(p.kind is p.POSITIONAL_ONLY for p in params):
        return "by-position"
    return "either"


def _json_value(value) -> tuple[bool, Any]:
    """(True, JSON form of value) if value is JSON data (an Enum counts as its value)."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return True, json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return False, None


# -- JSON Schema from annotations -----------------------------------------------------
# Written by hand rather than with pydantic: rpc_app does not depend on pydantic, and the
# mapping needed here is a few dozen lines.

def schema_of(tp, _seen: frozenset = frozenset()) -> dict:
    """JSON Schema (draft 7) of a Python annotation; ``{}`` means any JSON value."""
    if tp is inspect.Parameter.empty or tp is Any or tp is object:
        return {}
    if tp is None or (isinstance(tp, type) and tp in _SCALARS):
        return {"type": _SCALARS[type(None) if tp is None else tp]}
    origin = typing.get_origin(tp)
    if origin is not None:
        return _generic_schema(tp, origin, _seen)
    if isinstance(tp, type):
        return _class_schema(tp, _seen)
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return schema_of(supertype, _seen)
    return {"description": _type_name(tp)}


def _generic_schema(tp, origin, seen) -> dict:
    args = typing.get_args(tp)
    if origin in _UNION_TYPES:
        return {"anyOf": [schema_of(a, seen) for a in args]}
    if origin is typing.Literal:
        return _enum_schema(args)
    if origin is typing.Annotated:
        return schema_of(args[0], seen)
    if origin is list:
        return _array(args[0] if args else None, seen)
    if origin is tuple:
        return _tuple_schema(args, seen)
    if origin is dict:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = schema_of(args[1], seen)
        return out
    return {"description": _type_name(tp)}


def _enum_schema(values) -> dict:
    # Values that are not JSON (bytes, objects) are left out: the document must stay encodable.
    found = [v for ok, v in map(_json_value, values) if ok]
    return {"enum": found} if found else {}


def _array(item, seen) -> dict:
    out = {"type": "array"}
    if item is not None:
        out["items"] = schema_of(item, seen)
    return out


def _tuple_schema(args, seen) -> dict:
    if len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]
        return _array(args[0], seen)
    if not args:  # typing.Tuple without args
        return {"type": "array"}
    n = len(args)  # fixed tuple[X, Y]: one schema per position
    return {"type": "array", "items": [schema_of(a, seen) for a in args],
            "minItems": n, "maxItems": n, "additionalItems": False}


def _class_schema(cls: type, seen: frozenset) -> dict:
    if cls is list or cls is tuple:
        return {"type": "array"}
    if cls is dict:
        return {"type": "object"}
    if issubclass(cls, enum.Enum):
        return {"title": cls.__name__, **_enum_schema(list(cls))}
    is_td = typing.is_typeddict(cls)
    if not (is_td or dataclasses.is_dataclass(cls)):
        return {"description": cls.__name__}
    if cls in seen:  # recursive type: stop here rather than loop
        return {"description": cls.__name__}
    seen = seen | {cls}
    fields, required = _typeddict_fields(cls) if is_td else _dataclass_fields(cls)
    out = {"title": cls.__name__, "type": "object",
           "properties": {name: schema_of(ann, seen) for name, ann in fields.items()}}
    if required:
        out["required"] = required
    return out


def _typeddict_fields(cls) -> tuple[dict, list[str]]:
    fields = _class_hints(cls)
    return fields, [k for k in fields if k in cls.__required_keys__]


def _dataclass_fields(cls) -> tuple[dict, list[str]]:
    hints = _class_hints(cls)
    fields = {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(cls)}
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    return fields, required


def _class_hints(cls) -> dict:
    module = sys.modules.get(cls.__module__)
    return _hints(cls, vars(module) if module else {})


def _type_name(tp) -> str:
    if isinstance(tp, str):  # an unresolved forward reference
        return tp
    return getattr(tp, "__name__", None) or repr(tp)
