"""Class-based controllers and the compiled parameter-binding plan of every handler.

    class Items(Controller):
        prefix = "/items"

        def __init__(self, repo: ItemRepository):      # constructor injection
            self.repo = repo

        @get("/{id:int}", name="item")
        async def read(self, id: int): ...            # path parameter

        @get("/")
        async def index(self, limit: int = 20): ...    # query parameter with a default

        @post("/", status=201)
        async def create(self, body: ItemIn): ...     # JSON body decoded + validated by msgspec

Signatures are introspected once, at registration.  Each handler gets a plan - one small tuple per
parameter - and a bind function built from it; at request time binding is a loop over that tuple.

A parameter is bound, in this order, from: a path parameter of the same name; ``Request``; a JSON
body when annotated with a ``msgspec.Struct`` (or a list/dict of them, or ``Body[T]``); a DI token the
container provides; else a query parameter converted to its annotation (int, float, str, bool),
missing -> default, or 400 if there is none.
"""
from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Callable

import msgspec

from .di import REQUEST, Container, dependencies_of
from .exceptions import BadRequest, ValidationFailed
from .requests import Request

__all__ = ["Controller", "route", "get", "post", "put", "patch", "delete", "Body", "compile_handler"]

_ROUTES_ATTR = "__aquilia_routes__"


class Controller:
    """Base class of controllers.  ``prefix`` is prepended to every route pattern."""

    prefix: str = ""


def route(pattern: str, methods=("GET",), *, name: str | None = None, status: int = 200):
    def deco(fn):
        lst = getattr(fn, _ROUTES_ATTR, None)
        if lst is None:
            lst = []
            setattr(fn, _ROUTES_ATTR, lst)
        lst.append((pattern, tuple(methods), name, status))
        return fn

    return deco


def get(pattern: str, **kw):
    return route(pattern, ("GET",), **kw)


def post(pattern: str, **kw):
    return route(pattern, ("POST",), **kw)


def put(pattern: str, **kw):
    return route(pattern, ("PUT",), **kw)


def patch(pattern: str, **kw):
    return route(pattern, ("PATCH",), **kw)


def delete(pattern: str, **kw):
    return route(pattern, ("DELETE",), **kw)


def controller_routes(cls) -> list:
    """[(method_name, pattern, methods, name, status)] declared on a controller class."""
    out = []
    for attr, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
        for pattern, methods, name, status in getattr(fn, _ROUTES_ATTR, ()):
            out.append((attr, pattern, methods, name, status))
    return out


class _BodyMarker:
    def __class_getitem__(cls, item):
        return typing.Annotated[item, _BODY]


_BODY = object()
Body = _BodyMarker  # Body[list[int]] marks a JSON body of any msgspec-supported type

# plan entry kinds
P_PATH, P_REQUEST, P_BODY, P_DEP, P_QUERY = range(5)
_NODEFAULT = object()


def _is_body_type(tp) -> bool:
    if inspect.isclass(tp) and issubclass(tp, msgspec.Struct):
        return True
    origin = typing.get_origin(tp)
    if origin in (list, dict, tuple, set):
        return any(_is_body_type(a) for a in typing.get_args(tp))
    return False


def _query_converter(tp, pname: str) -> Callable[[str], Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if len(args) == 1 else str
    if tp in (inspect.Parameter.empty, str, Any):
        return str
    if tp is bool:
        def conv_bool(s: str) -> bool:
            ls = s.lower()
            if ls in ("1", "true", "yes", "on"):
                return True
            if ls in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(s)
        return conv_bool
    if tp is int:
        def conv_int(s: str) -> int:
            if not (s.isascii() and (s.isdigit() or (s[:1] == "-" and s[1:].isdigit()))):
                raise ValueError(s)
            return int(s)
        return conv_int
    if tp is float:
        def conv_float(s: str) -> float:
            v = float(s)
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(s)
            return v
        return conv_float
    raise TypeError(f"query parameter {pname!r}: unsupported annotation {tp!r} (use int, float, str, bool)")


def build_plan(fn: Callable, path_params: tuple, container: Container, skip_self: bool) -> tuple:
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    params = list(sig.parameters.values())
    if skip_self:
        params = params[1:]
    plan = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{fn.__qualname__}: *args/**kwargs are not bindable")
        tp = hints.get(p.name, p.annotation)
        default = p.default if p.default is not p.empty else _NODEFAULT
        if p.name in path_params:
            plan.append((P_PATH, p.name, None, default))
        elif tp is Request:
            plan.append((P_REQUEST, p.name, None, default))
        elif typing.get_origin(tp) is typing.Annotated and _BODY in typing.get_args(tp)[1:]:
            plan.append((P_BODY, p.name, msgspec.json.Decoder(typing.get_args(tp)[0]), default))
        elif _is_body_type(tp):
            plan.append((P_BODY, p.name, msgspec.json.Decoder(tp), default))
        elif tp in container:
            plan.append((P_DEP, p.name, tp, default))
        else:
            plan.append((P_QUERY, p.name, _query_converter(tp, p.name), default))
    if sum(1 for e in plan if e[0] == P_BODY) > 1:
        raise TypeError(f"{fn.__qualname__}: at most one body parameter")
    return tuple(plan)


async def bind(plan: tuple, request: Request, scope) -> dict:
    kwargs = {}
    for kind, name, extra, default in plan:
        if kind == P_PATH:
            kwargs[name] = request.path_params[name]
        elif kind == P_QUERY:
            raw = request.query.get(name)
            if raw is None:
                if default is _NODEFAULT:
                    raise ValidationFailed(f"query parameter {name!r} is required",
                                           errors=[{"loc": ["query", name], "msg": "required"}])
                kwargs[name] = default
            else:
                try:
                    kwargs[name] = extra(raw)
                except ValueError:
                    raise ValidationFailed(f"query parameter {name!r} has an invalid value {raw!r}",
                                           errors=[{"loc": ["query", name], "msg": "invalid value"}]) from None
        elif kind == P_BODY:
            body = await request.body()
            if not body:
                raise BadRequest("request body is empty; JSON expected")
            try:
                kwargs[name] = extra.decode(body)
            except msgspec.ValidationError as e:
                raise ValidationFailed(str(e), errors=[{"loc": ["body"], "msg": str(e)}]) from None
            except msgspec.DecodeError as e:
                raise BadRequest(f"malformed JSON: {e}") from None
        elif kind == P_REQUEST:
            kwargs[name] = request
        else:
            kwargs[name] = await scope.resolve(extra)
    return kwargs


def plan_needs_scope(plan: tuple, container: Container) -> bool:
    return any(e[0] == P_DEP and container.scope_of(e[2]) == REQUEST for e in plan)


def controller_needs(cls) -> tuple:
    return dependencies_of(cls)
