"""Decorator registry. Every introspection happens once, at registration.

A ``MethodSpec`` records what the engine needs per call: sync or async, blocking or not,
whether (and under which name) an ``RpcContext`` is injected, whether the function is
a consumer method taking the owner as first argument, and a params binder checked
against the signature (arity, names, simple builtin type annotations).
"""

from __future__ import annotations

import inspect
import typing
from typing import Callable

from .context import RpcContext
from .errors import InvalidParams

_SIMPLE_TYPES = {int: (int,), float: (int, float), str: (str,), bool: (bool,),
                 list: (list,), dict: (dict,)}
_TYPE_NAMES = {list: "array", dict: "object", str: "string", int: "integer",
               float: "number", bool: "boolean", type(None): "null"}

_MARK = "__rpc_method__"
_EMPTY: dict = {}


def _json_type(v) -> str:
    return _TYPE_NAMES.get(type(v), type(v).__name__)


class MethodSpec:
    __slots__ = ("name", "func", "is_async", "blocking", "timeout", "ctx_param", "bind_owner",
                 "positional", "required", "kw_required", "list_checks", "n_required", "n_max", "var_positional",
                 "var_keyword", "names", "checks", "calls_ok", "calls_error", "sync_plain", "__weakref__")

    def __init__(self, name: str, func: Callable, *, blocking: bool = False, bind_owner: bool = False,
                 timeout: float | None = None):
        self.name = name
        self.func = func
        self.blocking = bool(blocking)
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"rpc method {name!r}: timeout must be a positive number of seconds or None")
        self.timeout = timeout  # None: the engine's default deadline applies
        self.bind_owner = bind_owner
        self.is_async = inspect.iscoroutinefunction(func)
        if self.is_async and blocking:
            raise TypeError(f"rpc method {name!r}: blocking=True is for sync functions only")
        sig = inspect.signature(func)
        try:
            hints = typing.get_type_hints(func)
        except Exception:
            hints = {}
        params = list(sig.parameters.values())
        if bind_owner:
            if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
                raise TypeError(f"rpc method {name!r} must take self as its first parameter")
            params = params[1:]
        self.ctx_param = None
        positional: list[str] = []
        required: list[str] = []
        names: set[str] = set()
        checks: dict[str, tuple] = {}
        self.var_positional = False
        self.var_keyword = False
        ctx_slot = False
        for p in params:
            ann = hints.get(p.name, p.annotation)
            if ann is RpcContext or (p.name == "ctx" and ann is inspect.Parameter.empty):
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                    raise TypeError(f"rpc method {name!r}: the RpcContext parameter must be a keyword")
                if self.ctx_param is not None:
                    raise TypeError(f"rpc method {name!r}: more than one RpcContext parameter")
                self.ctx_param = p.name
                if p.kind is p.POSITIONAL_OR_KEYWORD:
                    ctx_slot = True  # later params cannot be filled by position
                continue
            if p.kind is p.VAR_POSITIONAL:
                self.var_positional = not ctx_slot
                continue
            if p.kind is p.VAR_KEYWORD:
                self.var_keyword = True
                continue
            if p.kind is not p.KEYWORD_ONLY and not ctx_slot:
                positional.append(p.name)
            if p.kind is not p.POSITIONAL_ONLY:
                names.add(p.name)
            if p.default is p.empty:
                required.append(p.name)
            if ann in _SIMPLE_TYPES:
                checks[p.name] = (_SIMPLE_TYPES[ann], ann)
        self.positional = tuple(positional)
        self.required = tuple(required)
        self.n_required = sum(1 for r in required if r in positional)
        self.kw_required = tuple(r for r in required if r not in positional)
        self.n_max = len(positional)
        self.names = frozenset(names)
        self.checks = checks
        self.list_checks = tuple((i, checks[nm][0], nm) for i, nm in enumerate(self.positional) if nm in checks)
        self.calls_ok = 0
        self.calls_error = 0
        # decided once: a sync method without RpcContext takes the engine's shortest path
        self.sync_plain = not self.is_async and not self.blocking and self.ctx_param is None

    # -- params -------------------------------------------------------------------
    def bind(self, params):
        """Turn JSON params (list, dict or missing=None) into (args, kwargs) or raise InvalidParams.

        ``args`` may be the params list itself and ``kwargs`` a shared empty dict: callers copy
        before mutating.
        """
        if type(params) is list:
            n = len(params)
            if self.n_required <= n <= self.n_max and not self.kw_required:
                for i, allowed, name in self.list_checks:
                    if i < n and type(params[i]) not in allowed:
                        self._check(name, params[i])
                return params, _EMPTY
            return self._bind_list_slow(params)
        if params is None:
            if self.required:
                raise InvalidParams(f"{self.name}() missing required params: {', '.join(self.required)}")
            return (), _EMPTY
        kwargs = params
        if not self.var_keyword:
            unknown = kwargs.keys() - self.names
            if unknown:
                raise InvalidParams(f"{self.name}() got unexpected params: {', '.join(sorted(unknown))}")
        if self.ctx_param is not None and self.ctx_param in kwargs:
            raise InvalidParams(f"{self.name}() got unexpected params: {self.ctx_param}")
        if self.checks:
            for name, value in kwargs.items():
                if name in self.checks:
                    self._check(name, value)
        for r in self.required:
            if r not in kwargs:
                missing = [r for r in self.required if r not in kwargs]
                raise InvalidParams(f"{self.name}() missing required params: {', '.join(missing)}")
        return (), kwargs

    def _bind_list_slow(self, params):
        n = len(params)
        if n < self.n_required or (n > self.n_max and not self.var_positional):
            if self.n_required == self.n_max:
                want = f"{self.n_max}"
            elif self.var_positional:
                want = f"at least {self.n_required}"
            else:
                want = f"{self.n_required} to {self.n_max}"
            raise InvalidParams(f"{self.name}() takes {want} positional params, got {n}")
        if self.kw_required:
            raise InvalidParams(f"{self.name}() requires named params: {', '.join(self.kw_required)}")
        for i, allowed, name in self.list_checks:
            if i < n and type(params[i]) not in allowed:
                self._check(name, params[i])
        return params, _EMPTY

    def _check(self, name, value) -> None:
        allowed, ann = self.checks[name]
        t = type(value)
        if t not in allowed:
            raise InvalidParams(f"{self.name}(): param {name!r} must be {_TYPE_NAMES[ann]}, got {_json_type(value)}")

    def __repr__(self) -> str:
        return f"MethodSpec({self.name!r}, async={self.is_async}, blocking={self.blocking}, ctx={self.ctx_param!r})"


class Registry:
    """Name -> MethodSpec. Use ``@registry.method()`` / ``@registry.method("name", blocking=True)``."""

    def __init__(self):
        self._methods: dict[str, MethodSpec] = {}

    def method(self, name: str | Callable | None = None, *, blocking: bool = False, timeout: float | None = None):
        """Register a function. ``timeout``: this method's deadline in seconds (async and blocking methods;
        default: the engine's ``call_timeout``)."""
        if callable(name):  # bare @registry.method
            return self.method()(name)

        def deco(func):
            self.add(func, name=name, blocking=blocking, timeout=timeout)
            return func
        return deco

    def add(self, func: Callable, *, name: str | None = None, blocking: bool = False,
            bind_owner: bool = False, timeout: float | None = None) -> MethodSpec:
        mname = name or func.__name__
        if not isinstance(mname, str) or not mname:
            raise TypeError("rpc method name must be a non-empty string")
        if mname.startswith("rpc."):
            raise ValueError("method names beginning with 'rpc.' are reserved by JSON-RPC 2.0")
        if mname in self._methods:
            raise ValueError(f"rpc method {mname!r} is already registered")
        spec = MethodSpec(mname, func, blocking=blocking, bind_owner=bind_owner, timeout=timeout)
        self._methods[mname] = spec
        return spec

    def get(self, name: str) -> MethodSpec | None:
        return self._methods.get(name)

    def __contains__(self, name) -> bool:
        return name in self._methods

    def __iter__(self):
        return iter(self._methods.values())

    def __len__(self) -> int:
        return len(self._methods)

    def names(self) -> list[str]:
        return list(self._methods)

    def copy(self) -> "Registry":
        r = Registry()
        r._methods = dict(self._methods)
        return r


def rpc_method(name: str | Callable | None = None, *, blocking: bool = False, timeout: float | None = None):
    """Mark a consumer method (``def m(self, ...)``) for registration by its class."""
    if callable(name):
        return rpc_method()(name)

    def deco(func):
        setattr(func, _MARK, {"name": name or func.__name__, "blocking": blocking, "timeout": timeout})
        return func
    return deco


def collect_marked(cls) -> Registry:
    """Registry of every @rpc_method of ``cls`` and its bases.

    The class nearest in the MRO that defines an attribute decides: a subclass that overrides an
    inherited rpc method without the decorator withdraws it (it is not exposed, and the parent's
    code is never called for it).
    """
    reg = Registry()
    seen: set[str] = set()
    for klass in cls.__mro__:
        for attr, func in vars(klass).items():
            if attr in seen:
                continue
            seen.add(attr)
            mark = getattr(func, _MARK, None)
            if mark is None or mark["name"] in reg:
                continue
            reg.add(func, name=mark["name"], blocking=mark["blocking"], bind_owner=True, timeout=mark["timeout"])
    return reg
