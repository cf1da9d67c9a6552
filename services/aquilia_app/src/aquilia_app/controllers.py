"""Class-based controllers and the compiled parameter-binding plan of every handler.

    class Items(Controller):
        prefix = "/items"

        def __init__(self, repo: ItemRepository):      # constructor injection
            self.repo = repo

        @get("/{id:int}", name="item")
        async def read(self, id: int): ...            # path parameter

        @get("/")
        async def index(self, limit: int = 20, tag: list[str] = []): ...   # query parameters

        @post("/", status=201)
        async def create(self, body: ItemIn, x_api_key: Header[str]): ...   # JSON body + a header

Signatures are introspected once, when the app compiles (start-up: the DI container must be known).
Each handler gets a plan - one small tuple per parameter - and at request time binding is a loop over
that tuple.  A parameter is bound from:

- a path parameter of the same name;
- the request: ``Request`` or any subclass; ``BackgroundTasks``: the request's tasks (created lazily);
- a marker, written ``Header[int]`` or, to rename, ``Annotated[int, Header(alias="x-api-key")]``:
  ``Query``, ``Header`` (name: the parameter's, ``_`` -> ``-``, case-insensitive), ``Cookie``,
  ``Form`` (a field; ``Form[SomeStruct]``: the whole form decoded into it) and ``Body`` (JSON);
- the form, without a marker: ``UploadFile`` / ``list[UploadFile]`` (the file part of that name),
  ``FormData`` (the whole form);
- a JSON body when annotated with a ``msgspec.Struct`` (or a list/dict of them);
- a DI token the container provides;
- else a query parameter.

Query, header, cookie and form values take ``str``, ``int``, ``float``, ``bool``, enums, ``Literal``,
``UUID``, dates and times, ``Decimal``, ``Annotated[..., msgspec.Meta(...)]`` constraints, ``T | None``
(no default given: ``None``) and ``list[T]`` (a repeated query parameter, header or form field).  Any
other annotation is a ``TypeError`` at compile time naming the handler and the parameter.  A value
that does not fit is a 422 whose ``errors`` say where (``{"loc": ["query", "limit"], ...}``).
``describe_plan`` gives the plan as data (for the OpenAPI document).
"""
from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import inspect
import types
import typing
import uuid
from typing import Annotated, Any, Callable, Literal

import msgspec

from .background import BackgroundTasks
from .di import REQUEST, Container, dependencies_of
from .exceptions import BadRequest, ResponseValidationError, UnsupportedMediaType, ValidationFailed, error_entry
from .forms import FormData, UploadFile
from .middleware import route_middleware
from .requests import Request
from .responses import CT_JSON, PerRequestResponse, Response
from .routing import MethodShortcuts, route_docs

__all__ = ["Controller", "route", "get", "post", "put", "patch", "delete", "Body", "Query", "Header", "Cookie",
           "Form", "build_plan", "bind", "describe_plan"]

_ROUTES_ATTR = "__aquilia_routes__"


class Controller:
    """Base class of controllers.  ``prefix`` is prepended to every route pattern; ``middleware`` (native
    middleware) runs around each of its routes, outside each route's own."""

    prefix: str = ""
    middleware: tuple = ()


def route(pattern: str, methods=("GET",), *, name: str | None = None, status: int = 200, middleware=(), **docs):
    """Declare a controller method as a handler; ``middleware``: native ``Middleware`` instances run around
    this route only, and ``docs`` the OpenAPI options (``routing.route_docs``), as with ``App.route``."""
    middleware = route_middleware(middleware)
    docs = route_docs(**docs) if docs else None

    def deco(fn):
        lst = getattr(fn, _ROUTES_ATTR, None)
        if lst is None:
            lst = []
            setattr(fn, _ROUTES_ATTR, lst)
        lst.append((pattern, tuple(methods), name, status, middleware, docs))
        return fn

    return deco


class _Declarations(MethodShortcuts):
    route = staticmethod(route)


get, post, put, patch, delete = (getattr(_Declarations(), m) for m in ("get", "post", "put", "patch", "delete"))


def controller_routes(cls) -> list:
    """[(method_name, pattern, methods, name, status, middleware, docs or None)] declared on a controller class."""
    out = []
    for attr, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
        for declared in getattr(fn, _ROUTES_ATTR, ()):
            out.append((attr, *declared))
    return out


# -- markers ---------------------------------------------------------------------------------------
class Marker:
    """Where a parameter comes from.  ``Header[T]`` is ``Annotated[T, Header()]``; an instance takes
    ``alias``: the name on the wire when it differs from the parameter's."""

    __slots__ = ("alias",)
    location = ""

    def __init__(self, alias: str | None = None):
        self.alias = alias

    def __class_getitem__(cls, item):
        return Annotated[item, cls()]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alias={self.alias!r})"


class Query(Marker):
    __slots__ = ()
    location = "query"


class Header(Marker):
    __slots__ = ()
    location = "header"


class Cookie(Marker):
    __slots__ = ()
    location = "cookie"


class Form(Marker):
    __slots__ = ()
    location = "form"


class Body(Marker):
    """``Body[list[int]]``: a JSON body of any msgspec-supported type."""

    __slots__ = ()
    location = "body"


# -- plan entries ------------------------------------------------------------------------------------
# kinds; application.py reads P_BODY and P_DEP (and the (kind, name, extra, default) shape)
P_PATH, P_REQUEST, P_BODY, P_DEP, P_QUERY, P_VALUE, P_FORM, P_BACKGROUND = range(8)
_NODEFAULT = object()
_WHAT = {"query": "query parameter", "header": "header", "cookie": "cookie", "path": "path parameter",
         "form": "form field"}


class Plan(tuple):
    """A handler's binding plan: ``(kind, name, extra, default)`` entries, and ``params``: the
    description of each parameter in signature order (``describe_plan``)."""

    params: tuple = ()


class _ItemError(ValueError):
    """The value at ``index`` of a list parameter did not convert."""

    def __init__(self, index: int, error: ValueError):
        super().__init__(str(error))
        self.index = index
        self.error = error


def _error(prefix: list, err: ValueError) -> dict:
    if isinstance(err, _ItemError):
        return _error(prefix + [err.index], err.error)
    if isinstance(err, msgspec.ValidationError):
        return error_entry(str(err), prefix)
    return {"loc": prefix, "msg": str(err) or "invalid value", "type": "type"}


def _missing(loc: str, key: str) -> ValidationFailed:
    return ValidationFailed(f"{_WHAT[loc]} {key!r} is required",
                            errors=[{"loc": [loc, key], "msg": "required", "type": "missing"}])


def _invalid(loc: str, key: str | None, raw, err: ValueError) -> ValidationFailed:
    entry = _error([loc] if key is None else [loc, key], err)
    if key is None:
        return ValidationFailed(f"the {loc} is invalid: {entry['msg']}", errors=[entry])
    if not isinstance(raw, str):  # a list or a file: the message says which item
        return ValidationFailed(f"{_WHAT[loc]} {key!r} is invalid: {entry['msg']}", errors=[entry])
    shown = repr(raw) if len(raw) <= 60 else repr(raw[:60]) + "..."
    return ValidationFailed(f"{_WHAT[loc]} {key!r} has an invalid value {shown}: {entry['msg']}", errors=[entry])


class _Field:
    """One parameter read from a request location (or the form) and converted."""

    __slots__ = ("loc", "key", "read", "convert")

    def __init__(self, loc: str, key: str | None, read: Callable, convert: Callable):
        self.loc, self.key, self.read, self.convert = loc, key, read, convert

    def bind(self, source, default):
        raw = self.read(source, self.key)
        if raw is None:
            if default is _NODEFAULT:
                raise _missing(self.loc, self.key)
            return default
        try:
            return self.convert(raw)
        except ValueError as e:  # msgspec.ValidationError is one too
            raise _invalid(self.loc, self.key, raw, e) from None


# -- converters from text ----------------------------------------------------------------------------
def _to_bool(s: str) -> bool:
    ls = s.lower()
    if ls in ("1", "true", "yes", "on"):
        return True
    if ls in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected a boolean")


def _to_int(s: str) -> int:
    if not (s.isascii() and (s.isdigit() or (s[:1] == "-" and s[1:].isdigit()))):
        raise ValueError("expected an integer")
    return int(s)


def _to_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ValueError("expected a number") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError("expected a finite number")
    return v


_PLAIN = {str: str, int: _to_int, float: _to_float, bool: _to_bool}
_LAX = (uuid.UUID, datetime.datetime, datetime.date, datetime.time, datetime.timedelta, decimal.Decimal)


def _scalar_converter(tp) -> Callable | None:
    """str -> value for a scalar annotation, or None when it is not one.  Plain types are parsed by
    hand (fast, and ``bool`` takes yes/no/on/off); enums, Literal, UUID, dates... by msgspec; an
    ``Annotated`` type is parsed as its base, then msgspec checks its constraints."""
    if tp is inspect.Parameter.empty or tp is Any:
        return str
    if isinstance(tp, type) and tp in _PLAIN:
        return _PLAIN[tp]
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        parse = _scalar_converter(base)
        if parse is None or not all(isinstance(m, msgspec.Meta) for m in meta):
            return None

        def checked(s: str):
            return msgspec.convert(parse(s), tp)
        return checked
    if origin is Literal or (inspect.isclass(tp) and (issubclass(tp, enum.Enum) or issubclass(tp, _LAX))):
        def lax(s: str):
            return msgspec.convert(s, tp, strict=False)
        return lax
    return None


def _list_converter(tp) -> Callable | None:
    """[str] -> list for ``list[T]`` (optionally ``Annotated`` with list constraints), else None."""
    core, constrained = tp, False
    if typing.get_origin(tp) is Annotated:
        core, *meta = typing.get_args(tp)
        constrained = all(isinstance(m, msgspec.Meta) for m in meta)
        if not constrained:
            return None
    if core is not list and typing.get_origin(core) is not list:
        return None
    args = typing.get_args(core)
    parse = _scalar_converter(args[0] if args else str)
    if parse is None:
        return None

    def convert_list(values: list):
        out = []
        for i, s in enumerate(values):
            try:
                out.append(parse(s))
            except ValueError as e:
                raise _ItemError(i, e) from None
        return msgspec.convert(out, tp) if constrained else out
    return convert_list


def _text_only(convert: Callable) -> Callable:
    """A form field's converter: refuses a file part where text is expected."""
    def text(value):
        if isinstance(value, UploadFile):
            raise ValueError("expected a text field, got a file")
        if isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, UploadFile):
                    raise _ItemError(i, ValueError("expected a text field, got a file"))
        return convert(value)
    return text


def _one_file(value):
    if not isinstance(value, UploadFile):
        raise ValueError("expected a file, got a text field")
    return value


def _files(values: list) -> list:
    for i, v in enumerate(values):
        if not isinstance(v, UploadFile):
            raise _ItemError(i, ValueError("expected a file, got a text field"))
    return values


def _pass_uploads(tp, obj):
    """msgspec ``dec_hook`` for form models: an ``UploadFile`` field takes the part as it is."""
    if inspect.isclass(tp) and isinstance(obj, tp):
        return obj
    raise ValueError(f"expected {getattr(tp, '__name__', tp)}")


def _model_converter(tp) -> Callable | None:
    """FormData -> ``tp`` (a Struct, dataclass or TypedDict): repeated keys become lists for the
    fields declared as collections, the last value otherwise; msgspec converts (``strict=False``)."""
    try:
        info = msgspec.inspect.type_info(tp)
    except (TypeError, ValueError):
        return None
    fields = getattr(info, "fields", None)
    if fields is None:
        return None
    many = frozenset(f.encode_name for f in fields if _is_collection(f.type))

    def convert_form(form: FormData):
        data = {}
        for k in form.keys():
            if k in many:
                values = _chosen_files(form.getall(k))
                if values:
                    data[k] = values
            elif not _empty_input(v := form.get(k)):
                data[k] = v
        return msgspec.convert(data, tp, strict=False, dec_hook=_pass_uploads)
    return convert_form


_COLLECTIONS = (msgspec.inspect.ListType, msgspec.inspect.SetType, msgspec.inspect.FrozenSetType,
                msgspec.inspect.VarTupleType)


def _is_collection(t) -> bool:
    if isinstance(t, msgspec.inspect.UnionType):
        return any(_is_collection(x) for x in t.types)
    return isinstance(t, _COLLECTIONS)


# -- readers (request or form, key) -> raw value or None ---------------------------------------------
def _read_query(req, key):
    return req.query.get(key)


def _read_query_list(req, key):
    return req.query_multi.get(key) or None


def _read_header(req, key):
    return req.header(key)


def _read_header_list(req, key):
    vals = [part.strip() for v in req.headers.getall(key) for part in v.split(",")]
    return [v for v in vals if v] or None  # a list header is comma-separated, repeated or not


def _read_cookie(req, key):
    return req.cookies.get(key)


def _read_path(req, key):
    return req.path_params[key]


def _empty_input(value) -> bool:
    """What a browser sends for an input left empty: ``""``, or a file part without a name or bytes
    (no file chosen).  It counts as absent, so the parameter takes its default (as FastAPI does)."""
    return value == "" or (isinstance(value, UploadFile) and value.filename == "" and value.size == 0)


def _chosen_files(values: list) -> list:
    """``values`` without the file inputs left empty (strings kept as they are)."""
    return [v for v in values if not (isinstance(v, UploadFile) and _empty_input(v))]


def _read_form(form, key):
    value = form.get(key)
    return None if value is None or _empty_input(value) else value


def _read_form_list(form, key):
    return _chosen_files(form.getall(key)) or None


def _read_whole(form, key):
    return form


def _background(request) -> BackgroundTasks:
    tasks = request.background
    if tasks is None:
        tasks = request.background = BackgroundTasks()
    return tasks


# -- building the plan (once per handler) ------------------------------------------------------------
def _strip_none(tp):
    """``(T, True)`` for ``T | None``, else ``(tp, False)``."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return rest[0], True
    return tp, False


def _unpack(tp, where: str):
    """``(marker or None, the type without marker and None, optional)`` of an annotation."""
    tp, optional = _strip_none(tp)
    if typing.get_origin(tp) is not Annotated:
        return None, tp, optional
    base, *meta = typing.get_args(tp)
    markers = [m for m in meta if isinstance(m, Marker) or (inspect.isclass(m) and issubclass(m, Marker))]
    if not markers:
        return None, tp, optional
    if len(markers) > 1:
        raise TypeError(f"{where}: more than one of Query/Header/Cookie/Form/Body")
    marker = markers[0]
    if inspect.isclass(marker):  # Annotated[int, Header]: the class for a default instance
        marker = marker()
    rest = [m for m in meta if m is not markers[0]]
    core, inner_optional = _strip_none(Annotated[(base, *rest)] if rest else base)
    return marker, core, optional or inner_optional


def _is_body_type(tp) -> bool:
    if inspect.isclass(tp) and issubclass(tp, msgspec.Struct):
        return True
    origin = typing.get_origin(tp)
    if origin in (list, dict, tuple, set):
        return any(_is_body_type(a) for a in typing.get_args(tp))
    return False


def _is_files(tp) -> bool:
    return typing.get_origin(tp) is list and typing.get_args(tp) == (UploadFile,)


def _provided(tp, container: Container) -> bool:
    try:
        return tp in container
    except TypeError:  # an unhashable annotation is no DI token
        return False


def _value_field(loc: str, key: str, core, where: str, *, many_ok: bool = True) -> _Field:
    """A query/header/cookie/form/path field converting to ``core`` (scalar or list)."""
    scalar = _scalar_converter(core)
    if scalar is not None:
        read = {"query": _read_query, "header": _read_header, "cookie": _read_cookie, "form": _read_form,
                "path": _read_path}[loc]
        return _Field(loc, key, read, _text_only(scalar) if loc == "form" else scalar)
    many = _list_converter(core) if many_ok else None
    if many is not None:
        read = {"query": _read_query_list, "header": _read_header_list, "form": _read_form_list}[loc]
        return _Field(loc, key, read, _text_only(many) if loc == "form" else many)
    raise TypeError(f"{where}: unsupported annotation {core!r} for a {_WHAT[loc]} (use str, int, float, bool, "
                    f"an enum, Literal, UUID, a date/time, Decimal, Annotated[..., msgspec.Meta(...)]"
                    f"{', or a list of them' if many_ok else ''}), or register it with the DI container")


def _form_entry(key: str, core, where: str):
    """(kind, extra, location, wire name) of a parameter bound from the form."""
    if core is FormData:
        return P_FORM, _Field("form", None, _read_whole, lambda form: form), "formdata", None
    if core is UploadFile:
        return P_FORM, _Field("form", key, _read_form, _one_file), "file", key
    if _is_files(core):
        return P_FORM, _Field("form", key, _read_form_list, _files), "file", key
    if inspect.isclass(core) and _scalar_converter(core) is None:
        model = _model_converter(core)
        if model is not None:
            return P_FORM, _Field("form", None, _read_whole, model), "form", None
    return P_FORM, _value_field("form", key, core, where), "form", key


def _marked_entry(name: str, marker: Marker, core, where: str):
    """(kind, extra, location, wire name) of a parameter with a Query/Header/Cookie/Form/Body marker."""
    loc = marker.location
    if loc == "body":
        return P_BODY, msgspec.json.Decoder(core), "body", None
    if loc == "header":
        key = (marker.alias or name.replace("_", "-")).lower()
        return P_VALUE, _value_field("header", key, core, where), "header", key
    key = marker.alias or name
    if loc == "form":
        return _form_entry(key, core, where)
    if loc == "cookie":
        return P_VALUE, _value_field("cookie", key, core, where, many_ok=False), "cookie", key
    return _query_entry(name, key, core, where) + ("query", key)


def _query_entry(name: str, key: str, core, where: str):
    """(kind, extra): the fast ``P_QUERY`` for an unrenamed scalar, else a general field."""
    scalar = _scalar_converter(core)
    if scalar is not None and key == name:
        return P_QUERY, scalar
    return P_VALUE, _value_field("query", key, core, where)


_CASTOR_MAKES = {"int": int, "float": float, "uuid": uuid.UUID}  # a typed segment's value; the others give str


def path_types(parsed) -> dict:
    """name -> the type a route pattern's castor makes of each parameter (``build_plan``'s ``path_params``)."""
    return {seg.name: _CASTOR_MAKES.get(seg.type, str)
            for variant in parsed.variants for seg in variant if not isinstance(seg, str)}


def _unmarked_entry(name: str, core, tp, path_params: dict, container: Container, where: str):
    """(kind, extra, location, wire name) of a parameter without a marker (see the module docstring)."""
    if name in path_params:
        if core in (inspect.Parameter.empty, Any) or core is path_params[name]:
            return P_PATH, None, "path", name  # the route's castor already made the value
        # ``{id}`` (a str) with ``id: int``, as FastAPI writes it: converted, or 422 at ["path", "id"]
        convert = _value_field("path", name, core, where, many_ok=False).convert  # a TypeError if it cannot

        def to_core(v):
            return convert(v if v.__class__ is str else str(v))
        return P_VALUE, _Field("path", name, _read_path, to_core), "path", name
    if inspect.isclass(core) and issubclass(core, Request):
        return P_REQUEST, None, "request", None
    if core is BackgroundTasks:
        return P_BACKGROUND, None, "background", None
    if core is FormData or core is UploadFile or _is_files(core):
        return _form_entry(name, core, where)
    if _is_body_type(core):
        return P_BODY, msgspec.json.Decoder(core), "body", None
    if _provided(tp, container) or _provided(core, container):
        return P_DEP, tp if _provided(tp, container) else core, "dependency", None
    return _query_entry(name, name, core, where) + ("query", name)


def _described(location: str, name: str, alias, tp, required: bool, default) -> dict:
    return {"location": location, "name": name, "alias": alias, "type": tp, "required": required,
            "default": default}


def _describe(name: str, loc: str, key, core, optional: bool, default) -> list[dict]:
    """The ``describe_plan`` entries of one parameter: one, or one per field of a form model."""
    if core is inspect.Parameter.empty:
        core = str
    if loc == "form" and key is None:  # Form[Model]: its fields are what the client sends
        return [dict(d, model=name) for d in _model_fields(core)]
    tp = core | None if optional else core
    required = default is _NODEFAULT
    return [_described(loc, name, key, tp, required, None if required else default)]


def _model_fields(tp) -> list[dict]:
    hints = typing.get_type_hints(tp, include_extras=True)
    out = []
    for f in msgspec.inspect.type_info(tp).fields:
        ftp = hints.get(f.name, Any)
        bare = _strip_none(ftp)[0]
        loc = "file" if bare is UploadFile or _is_files(bare) else "form"
        default = None if f.default is msgspec.NODEFAULT else f.default
        out.append(_described(loc, f.name, f.encode_name, ftp, f.required, default))
    return out


def build_plan(fn: Callable, path_params: dict, container: Container, skip_self: bool) -> Plan:
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    params = list(sig.parameters.values())
    if skip_self:
        params = params[1:]
    entries, described = [], []
    for p in params:
        where = f"{fn.__qualname__}, parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{where}: *args, **kwargs and positional-only parameters are not bindable")
        tp = hints.get(p.name, p.annotation)
        default = p.default if p.default is not p.empty else _NODEFAULT
        marker, core, optional = _unpack(tp, where)
        if optional and default is _NODEFAULT:
            default = None  # ``x: int | None`` may be absent
        if marker is None:
            kind, extra, loc, key = _unmarked_entry(p.name, core, tp, path_params, container, where)
        else:
            kind, extra, loc, key = _marked_entry(p.name, marker, core, where)
        entries.append((kind, p.name, extra, default))
        described.extend(_describe(p.name, loc, key, core, optional, default))
    kinds = [e[0] for e in entries]
    if kinds.count(P_BODY) > 1:
        raise TypeError(f"{fn.__qualname__}: at most one body parameter")
    if P_BODY in kinds and P_FORM in kinds:
        raise TypeError(f"{fn.__qualname__}: a handler reads a JSON body or a form, not both")
    # dependencies last: the body or form is read before any provider runs (a slow upload must not
    # hold a pooled connection)
    plan = Plan(sorted(entries, key=lambda e: e[0] == P_DEP))
    plan.params = tuple(described)
    return plan


def describe_plan(plan) -> list[dict]:
    """Each parameter of a plan as ``{"location", "name", "alias", "type", "required", "default"}``.
    ``location``: path, query, header, cookie, body, form (a field, or each field of a form model),
    file, formdata, request, background or dependency; ``alias``: the name on the wire."""
    return [dict(d) for d in getattr(plan, "params", ())]


def is_json_media_type(content_type: str) -> bool:
    """``application/json`` or ``application/<anything>+json`` (RFC 6839), parameters ignored."""
    if content_type.startswith("application/json") and content_type[16:17] in ("", ";", " "):
        return True  # the usual case, without splitting
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


# -- results -----------------------------------------------------------------------------------------
_STREAMS = frozenset((collections.abc.AsyncIterator, collections.abc.AsyncIterable, collections.abc.AsyncGenerator,
                      collections.abc.Iterator, collections.abc.Iterable, collections.abc.Generator))


def return_annotation(fn):
    """The handler's return annotation, unless it is absent, ``None``, ``Any`` or a response class."""
    try:
        tp = typing.get_type_hints(fn).get("return")
    except Exception:
        return None
    if tp is None or tp is type(None) or tp is Any:
        return None
    if inspect.isclass(tp) and (issubclass(tp, (Response, PerRequestResponse)) or not hasattr(tp, "__mro__")):
        return None
    return tp


def _holds_a_model(tp, depth: int = 0) -> bool:
    if inspect.isclass(tp) and (issubclass(tp, msgspec.Struct) or dataclasses.is_dataclass(tp)
                                or typing.is_typeddict(tp)):
        return True
    return depth < 8 and any(_holds_a_model(a, depth + 1) for a in typing.get_args(tp))


def response_model(fn):
    """The return annotation when it describes models (msgspec Structs, dataclasses, TypedDicts, or
    containers of them), as FastAPI's ``response_model``: the handler's result is converted to it
    (fields it does not declare are left out).  None for plain annotations (``dict``, ``str``) and streams."""
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        return None
    tp = return_annotation(fn)
    if tp is None or typing.get_origin(tp) in _STREAMS or not _holds_a_model(tp):
        return None
    return tp


def converting(call, model, status: int, owner: str):
    """``call`` with its result converted to ``model`` and sent as JSON; a response or None passes as it
    is; a result that does not fit is a ``ResponseValidationError`` (500)."""
    encode = msgspec.json.Encoder().encode

    async def call_converted(req, hot):
        result = await call(req, hot)
        if result is None or isinstance(result, (Response, PerRequestResponse)):
            return result
        try:
            value = msgspec.convert(result, model, from_attributes=True)
        except msgspec.ValidationError as e:
            raise ResponseValidationError(f"the result of {owner} does not match its return annotation "
                                          f"{_type_name(model)}: {e}") from None
        return Response(encode(value), status, None, CT_JSON)

    return call_converted


def _type_name(tp) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def _decode_json(decoder, body: bytes, content_type: str | None):
    """A declared JSON body: a Content-Type other than JSON is 415 (none at all is read as JSON)."""
    if content_type is not None and not is_json_media_type(content_type):
        raise UnsupportedMediaType(f"expected application/json, got {content_type[:100]}")
    if not body:
        raise BadRequest("request body is empty; JSON expected")
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as e:
        raise ValidationFailed.from_msgspec(e, ["body"]) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as e:  # msgspec: a string that is not UTF-8
        raise BadRequest(f"malformed JSON: {e}") from None


async def bind(plan: tuple, request: Request, scope) -> dict:
    kwargs = {}
    try:  # free until something raises (zero-cost exceptions)
        for kind, name, extra, default in plan:
            if kind == P_PATH:
                kwargs[name] = request.path_params[name]
            elif kind == P_QUERY:
                raw = request.query.get(name)
                if raw is None:
                    if default is _NODEFAULT:
                        raise _missing("query", name)
                    kwargs[name] = default
                else:
                    try:
                        kwargs[name] = extra(raw)
                    except ValueError as e:
                        raise _invalid("query", name, raw, e) from None
            elif kind == P_BODY:
                body = await request.body()
                if not body and default is not _NODEFAULT:  # an optional body that was not sent (FastAPI)
                    kwargs[name] = default
                else:
                    kwargs[name] = _decode_json(extra, body, request.header("content-type"))
            elif kind == P_REQUEST:
                kwargs[name] = request
            elif kind == P_DEP:
                kwargs[name] = await scope.resolve(extra)
            elif kind == P_VALUE:
                kwargs[name] = extra.bind(request, default)
            elif kind == P_FORM:
                kwargs[name] = extra.bind(await request.form(), default)
            else:
                kwargs[name] = _background(request)
    except ValidationFailed as e:
        raise _every_error(plan, request, e) from None
    return kwargs


def _every_error(plan: tuple, request: Request, first: ValidationFailed) -> ValidationFailed:
    """``first`` plus the errors of the other parameters that can be checked without I/O (query,
    header, cookie, path, and the form once it is parsed): a client learns every mistake at once."""
    errors = list(first.errors or ())
    form = request._form  # None: the form was not read
    for kind, name, extra, default in plan:
        if kind == P_QUERY:
            extra, source = _Field("query", name, _read_query, extra), request
        elif kind == P_VALUE:
            source = request
        elif kind == P_FORM and form is not None:
            source = form
        else:
            continue
        try:
            extra.bind(source, default)
        except ValidationFailed as e:
            errors.extend(x for x in e.errors or () if x not in errors)
    if len(errors) <= len(first.errors or ()):
        return first
    return ValidationFailed(f"{first.detail} (and {len(errors) - 1} more errors)", errors=errors)


def plan_needs_scope(plan: tuple, container: Container) -> bool:
    return any(e[0] == P_DEP and container.scope_of(e[2]) == REQUEST for e in plan)


def plan_reads_form(plan: tuple) -> bool:
    return any(e[0] == P_FORM for e in plan)


def controller_needs(cls) -> tuple:
    return dependencies_of(cls)
