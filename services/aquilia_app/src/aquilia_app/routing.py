"""Route table compiled into a matcher.

* Static routes (no parameters) are one ``dict`` lookup on the full path.
* Dynamic routes live in a segment tree: each node has a dict of static children, a short list of typed
  parameter children (sorted by specificity: int, uuid, float, slug, str; constrained before
  unconstrained) and catch-all ``path`` leaves.  A lookup walks one node per path segment and only
  backtracks among the parameter children of a node, so it never walks every route.
* A miss (404) is usually decided after a couple of dict lookups; 405 with the ``Allow`` set is
  computed on the miss path only.
* Two routes that would answer the same requests (same shape, same method) raise
  :class:`RouteConflict` when the router is compiled.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable
from urllib.parse import quote

from .patterns import NO, TYPE_ORDER, Param, parse

_PATH_SAFE = "/:@!$&'()*+,;=-._~"  # RFC 3986 pchar and "/": what a path keeps unencoded


def encode_path(path: str) -> str:
    """A decoded path percent-encoded for a URL or a Location ("%" included: it was decoded)."""
    return quote(path, safe=_PATH_SAFE)

__all__ = ["MethodShortcuts", "Route", "Router", "RouteConflict", "URLBuildError", "Match", "NOT_FOUND"]

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})



class MethodShortcuts:
    """``get``/``post``/``put``/``patch``/``delete`` as ``self.route(pattern, (METHOD,), **kw)``: one
    definition of the shortcuts for ``App`` and for controllers' module-level decorators, each of which
    defines ``route``."""

    def get(self, pattern: str, **kw):
        return self.route(pattern, ("GET",), **kw)

    def post(self, pattern: str, **kw):
        return self.route(pattern, ("POST",), **kw)

    def put(self, pattern: str, **kw):
        return self.route(pattern, ("PUT",), **kw)

    def patch(self, pattern: str, **kw):
        return self.route(pattern, ("PATCH",), **kw)

    def delete(self, pattern: str, **kw):
        return self.route(pattern, ("DELETE",), **kw)

def route_docs(*, tags=(), summary: str | None = None, description: str | None = None, deprecated: bool = False,
               include_in_schema: bool = True) -> dict:
    """A route's OpenAPI options (``app.get(..., tags=["items"], deprecated=True)``), checked when the
    route is declared; ``openapi.py`` reads them from ``Route.meta["openapi"]``: ``tags`` (after a
    controller's own tag), ``summary`` and ``description`` (else the handler's docstring: its first line
    and the rest), ``deprecated``, ``include_in_schema``."""
    if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
        raise TypeError(f"tags is a list of non-empty strings, not {tags!r}")
    for key, value in (("summary", summary), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{key} is a string, not {value!r}")
    return {"tags": tuple(tags), "summary": summary, "description": description, "deprecated": bool(deprecated),
            "include_in_schema": bool(include_in_schema)}


class RouteConflict(ValueError):
    """Two routes are ambiguous (or a route name is reused)."""


class URLBuildError(LookupError):
    """``url_for`` got an unknown route name, missing/extra parameters or values that do not match."""


class Route:
    __slots__ = ("pattern", "methods", "endpoint", "name", "parsed", "meta")

    def __init__(self, pattern: str, methods: Iterable[str], endpoint: Any, name: str | None = None, meta=None):
        self.pattern = pattern
        ms = tuple(dict.fromkeys(m.upper() for m in methods))
        for m in ms:
            if m not in HTTP_METHODS:
                raise ValueError(f"unknown HTTP method {m!r} for {pattern!r}")
        if not ms:
            raise ValueError(f"route {pattern!r} has no methods")
        self.methods = ms
        self.endpoint = endpoint
        self.name = name
        self.parsed = parse(pattern)
        self.meta = meta

    def __repr__(self) -> str:
        return f"Route({self.pattern!r}, {list(self.methods)!r}, name={self.name!r})"


class _Node:
    __slots__ = ("static", "params", "catchall", "methods")

    def __init__(self):
        self.static: dict[str, _Node] = {}
        self.params: list = []  # [(Param, _Node)] sorted by specificity after compile
        self.catchall: list = []  # [(Param, {method: (route, names)})]
        self.methods: dict | None = None  # {method: (route, names)}


def _specificity(p: Param):
    return (TYPE_ORDER[p.type], -len(p.constraints), p.constraints)


# Result of a lookup: (route, params) on a hit; status 404/405 with the allowed methods on a miss.
class Match:
    __slots__ = ("route", "params", "status", "allow")

    def __init__(self, route, params, status=200, allow=()):
        self.route = route
        self.params = params
        self.status = status
        self.allow = allow


NOT_FOUND = Match(None, None, 404)
_EMPTY: dict = {}


class Router:
    def __init__(self):
        self.routes: list[Route] = []
        self._names: dict[str, Route] = {}
        self._default_names: dict[str, Route] = {}  # an unnamed route's handler name -> the first such route
        self._url_forms: dict[str, list] = {}  # url_for's parts of each named route, made on first use
        self._static: dict[str, dict] = {}
        self._root = _Node()
        self._compiled = False

    # -- registration -------------------------------------------------------------------------
    def add(self, pattern: str, methods: Iterable[str], endpoint: Any, name: str | None = None, meta=None,
            default_name: str | None = None) -> Route:
        """``default_name`` (the handler's function name) lets ``url_for`` find an unnamed route, as
        Starlette names routes after their endpoint: a given name wins, then the first route of that
        function name."""
        if self._compiled:
            raise RuntimeError("router already compiled")
        route = Route(pattern, methods, endpoint, name, meta)
        if name is not None:
            if name in self._names:
                raise RouteConflict(f"route name {name!r} is used by {self._names[name].pattern!r} and {pattern!r}")
            self._names[name] = route
        elif default_name:
            self._default_names.setdefault(default_name, route)
        self.routes.append(route)
        return route

    # -- compilation --------------------------------------------------------------------------
    def compile(self) -> "Router":
        if self._compiled:
            return self
        for route in self.routes:
            for variant in route.parsed.variants:
                names = tuple(s.name for s in variant if isinstance(s, Param))
                if not names:
                    path = "/" + "/".join(variant)
                    slot = self._static.setdefault(path, {})
                    # a static slot holds (route, params): the parameters its optional parts leave out are None
                    self._put(slot, route, dict.fromkeys(route.parsed.params) if route.parsed.params else _EMPTY,
                              path)
                    continue
                node = self._root
                for k, seg in enumerate(variant):
                    if isinstance(seg, str):
                        node = node.static.setdefault(seg, _Node())
                    elif seg.type == "path":
                        for p, slot in node.catchall:
                            if p.signature == seg.signature:
                                break
                        else:
                            slot = {}
                            node.catchall.append((seg, slot))
                        self._put(slot, route, names, route.pattern)
                        node = None
                        break
                    else:
                        for p, child in node.params:
                            if p.signature == seg.signature:
                                node = child
                                break
                        else:
                            child = _Node()
                            node.params.append((seg, child))
                            node = child
                if node is not None:
                    if node.methods is None:
                        node.methods = {}
                    self._put(node.methods, route, names, route.pattern)
        self._sort(self._root)
        self._compiled = True
        return self

    @staticmethod
    def _put(slot: dict, route: Route, names: tuple, shown: str):
        for m in route.methods:
            if m in slot:
                other = slot[m][0]
                raise RouteConflict(
                    f"ambiguous routes: {m} {other.pattern!r} and {m} {route.pattern!r} match the same paths ({shown!r})"
                )
            slot[m] = (route, names)

    def _sort(self, node: _Node):
        node.params.sort(key=lambda pc: _specificity(pc[0]))
        node.catchall.sort(key=lambda pc: _specificity(pc[0]))
        for child in node.static.values():
            self._sort(child)
        for _, child in node.params:
            self._sort(child)

    # -- matching -----------------------------------------------------------------------------
    def match(self, method: str, path: str) -> Match:
        """Find the route for ``method path``.  Never raises for any str input."""
        slot = self._static.get(path)
        if slot is not None:
            hit = slot.get(method)
            if hit is not None:
                return Match(hit[0], hit[1])
            if method == "HEAD":
                hit = slot.get("GET")
                if hit is not None:
                    return Match(hit[0], hit[1])
        segs = path[1:].split("/")
        values: list = []
        hit = _walk(self._root, segs, 0, len(segs), method, values)
        if hit is None and method == "HEAD":
            hit = _walk(self._root, segs, 0, len(segs), "GET", values)
        if hit is not None:
            route, names = hit
            params = dict(zip(names, values))
            if len(names) != len(route.parsed.params):
                for n in route.parsed.params:
                    params.setdefault(n, None)
            return Match(route, params)
        # Miss: which methods would have matched the path?
        allow: set = set()
        if slot is not None:
            allow.update(slot)
        _allowed(self._root, segs, 0, len(segs), allow)
        if allow:
            if "GET" in allow:
                allow.add("HEAD")
            return Match(None, None, 405, tuple(sorted(allow)))
        return NOT_FOUND

    # -- URL building -------------------------------------------------------------------------
    def url_for(self, name: str, /, **params: Any) -> str:
        forms = self._url_forms.get(name)
        if forms is None:
            route = self._names.get(name) or self._default_names.get(name)
            if route is None:
                raise URLBuildError(f"no route named {name!r}")
            forms = self._url_forms[name] = _url_forms(route)
        # A None value counts as not given; without one the keys are the given names (no set built).
        given = {k for k, v in params.items() if v is not None} if None in params.values() else params.keys()
        for names, parts in forms:
            if names != given:
                continue
            out = []
            for part in parts:
                if part.__class__ is str:
                    out.append(part)
                    continue
                value = params[part.name]
                text = str(value).lower() if isinstance(value, bool) else str(value)
                if part.cast(text) is NO and (not isinstance(value, float) or part.cast(text := _positional(text)) is NO):
                    raise URLBuildError(
                        f"value {value!r} for {part.name!r} does not match {part.type} {dict(part.constraints) or ''}".rstrip()
                    )
                out.append(text if text.isalnum() and text.isascii() else
                           quote(text, safe="/" if part.type == "path" else "-._~"))
            return "/" + "/".join(out)
        route = self._names.get(name) or self._default_names[name]
        raise URLBuildError(
            f"route {name!r} ({route.pattern!r}) has no form with exactly the parameters {sorted(given)!r}"
        )


def _positional(text: str) -> str:
    """A float's text without an exponent (``1e-05`` -> ``0.00001``), which a ``float`` segment takes."""
    try:
        return format(Decimal(text), "f")
    except ArithmeticError:
        return text


def _url_forms(route) -> list[tuple[frozenset, list]]:
    """A route's forms for url_for, longest first: (parameter names, parts), static parts quoted once."""
    forms = []
    for variant in sorted(route.parsed.variants, key=len, reverse=True):
        names = frozenset(s.name for s in variant if isinstance(s, Param))
        parts = [encode_path(s) if isinstance(s, str) else s for s in variant]
        forms.append((names, parts))
    return forms


def _walk(node: _Node, segs: list, i: int, n: int, method: str, values: list):
    if i == n:
        ms = node.methods
        if ms is not None:
            return ms.get(method)
        return None
    seg = segs[i]
    child = node.static.get(seg)
    if child is not None:
        hit = _walk(child, segs, i + 1, n, method, values)
        if hit is not None:
            return hit
    for p, child in node.params:
        v = p.cast(seg)
        if v is not NO:
            values.append(v)
            hit = _walk(child, segs, i + 1, n, method, values)
            if hit is not None:
                return hit
            values.pop()
    if node.catchall:
        rest = "/".join(segs[i:])
        for p, slot in node.catchall:
            hit = slot.get(method)
            if hit is not None:
                v = p.cast(rest)
                if v is not NO:
                    values.append(v)
                    return hit
    return None


def _allowed(node: _Node, segs: list, i: int, n: int, out: set):
    if i == n:
        if node.methods:
            out.update(node.methods)
        return
    seg = segs[i]
    child = node.static.get(seg)
    if child is not None:
        _allowed(child, segs, i + 1, n, out)
    for p, child in node.params:
        if p.cast(seg) is not NO:
            _allowed(child, segs, i + 1, n, out)
    if node.catchall:
        rest = "/".join(segs[i:])
        for p, slot in node.catchall:
            if p.cast(rest) is not NO:
                out.update(slot)
