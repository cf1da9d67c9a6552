"""The transport-agnostic JSON-RPC 2.0 engine: bytes in -> bytes out.

``Engine.handle(data, session)`` returns, without awaiting anything when it can:

* ``bytes``: the response to send (single response or batch array);
* ``None``: nothing to send (notification, batch of notifications);
* a coroutine: the call is async (async method, blocking method in the thread pool,
  async middleware); await it to get ``bytes`` or ``None``.

Sync methods thus cost no task and no await. Stages: parse (orjson) -> validate
(limits) -> dispatch (lookup, params binding, call) -> encode (orjson).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from concurrent.futures import Executor, ThreadPoolExecutor
from time import perf_counter
from typing import Any

import orjson

from . import errors as E
from .context import RpcContext
from .errors import LimitExceeded, RpcError
from .limits import Limits
from .middleware import MiddlewareChain
from .registry import Registry

log = logging.getLogger("rpc_app")

_loads = orjson.loads
_dumps = orjson.dumps
_JSONDecodeError = orjson.JSONDecodeError
_MISSING = object()
_ID_TYPES = (str, int, float, type(None))

UNKNOWN = "(unknown)"
INVALID = "(invalid)"


def error_response(rid: Any, code: int, message: str | None = None, data: Any = None) -> bytes:
    err = {"code": code, "message": message if message is not None else E.MESSAGES.get(code, "Server error")}
    if data is not None:
        err["data"] = data
    return _dumps({"jsonrpc": "2.0", "error": err, "id": rid})


def _err_obj(rid, exc: RpcError) -> dict:
    return {"jsonrpc": "2.0", "error": exc.to_dict(), "id": rid}


class _Fail(Exception):
    """Internal: a request-level error with the id to answer (None when unknown)."""

    __slots__ = ("rid", "error", "method", "outcome")

    def __init__(self, rid, error: RpcError, method: str, outcome: str):
        self.rid = rid
        self.error = error
        self.method = method
        self.outcome = outcome


class Engine:
    def __init__(self, registry: Registry, *, limits: Limits | None = None, middleware=(),
                 debug: bool = False, metrics=None, executor: Executor | None = None,
                 rate_limit=None):
        self.registry = registry
        self.limits = limits or Limits()
        self.mw = MiddlewareChain(middleware)
        self.debug = debug
        self.metrics = metrics
        self._executor = executor
        self.rate_limit = rate_limit
        self._counter = 0
        self._methods = registry._methods  # shared: methods added later are seen
        self._max_method = self.limits.max_method_name_length
        self._no_mw = not self.mw.active and not self.mw.is_async
        self.in_flight = 0  # async calls running (exported as rpc_in_flight)
        lim = self.limits
        # messages up to this many bytes (or characters) cannot break any size limit
        self._small = min(2 * lim.max_depth, lim.max_string_length + 1, 2 * lim.max_array_length + 1,
                          lim.max_message_bytes // 4)
        self._fails: dict[tuple[str, str], int] = {}
        self._errors: dict[str, int] = {}
        if metrics is not None:
            metrics.attach(self)
            self._mask = metrics.sample_mask
        else:
            self._mask = -1  # never sample

    # -- public ---------------------------------------------------------------------
    def handle(self, data, session=None):
        """One WebSocket message in (bytes or str); bytes / None / coroutine out."""
        self._counter += 1
        if self._counter & self._mask == 0:
            return self._handle_timed(data, session)
        if len(data) > self._small:
            return self._handle_general(data, session)
        # Small message: no size limit can be broken (see Limits.needed), except the
        # method name's, checked in dispatch.
        try:
            msg = _loads(data)
        except _JSONDecodeError:
            return self._handle_general(data, session)
        if type(msg) is not dict:
            return self._handle_general(data, session)
        try:
            out = self._dispatch_inner(msg, session, False)
        except _Fail as f:
            return self._fail_bytes(f)
        if type(out) is tuple:
            try:
                return _dumps({"jsonrpc": "2.0", "result": out[1], "id": out[0]})
            except TypeError:
                return self._encode(out)
        return out

    def _handle_general(self, data, session):
        try:
            msg = self._parse(data)
            flags, opens = self.limits.analyze(data)
            if flags:
                self.limits.check(msg, flags, opens)
        except _Fail as f:
            return self._fail_bytes(f)
        except LimitExceeded as exc:
            return self._limit_fail(msg, exc)
        if type(msg) is dict:
            out = self._dispatch(msg, session)
            if type(out) is tuple:
                return self._encode(out)
            return out
        return self._batch(msg, session)

    async def handle_async(self, data, session=None):
        """Convenience: always awaitable."""
        out = self.handle(data, session)
        if out is None or type(out) is bytes:
            return out
        return await out

    def call_counts(self) -> dict:
        out = dict(self._fails)
        for spec in self.registry:
            if spec.calls_ok:
                out[(spec.name, "ok")] = spec.calls_ok
        for name, n in self._errors.items():
            out[(name, "error")] = n
        return out

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(thread_name_prefix="rpc-blocking")
        return self._executor

    # -- stages ---------------------------------------------------------------------
    def _parse(self, data):
        lim = self.limits
        if len(data) > lim.max_message_bytes >> 2 and lim.message_bytes(data) > lim.max_message_bytes:
            raise _Fail(None, LimitExceeded("message_bytes", lim.max_message_bytes, lim.message_bytes(data)),
                        INVALID, "limit")
        try:
            msg = _loads(data)
        except _JSONDecodeError as exc:
            text = str(exc)
            if "depth" in text or "recursion" in text:
                raise _Fail(None, LimitExceeded("nesting_depth", lim.max_depth), INVALID, "limit") from None
            raise _Fail(None, RpcError(E.PARSE_ERROR, "Parse error", text), INVALID, "parse_error") from None
        if type(msg) is not dict and type(msg) is not list:
            raise _Fail(None, RpcError(E.INVALID_REQUEST, "Invalid Request",
                                       "a request must be a JSON object or an array of them"),
                        INVALID, "invalid_request")
        return msg

    def _dispatch(self, msg: dict, session, in_batch: bool = False):
        """Validate one request object and call it.

        Returns (rid, result) on sync success, bytes (error response), None (notification),
        or a coroutine (async path). In a batch, error responses are dicts, not bytes.
        """
        try:
            return self._dispatch_inner(msg, session, in_batch)
        except _Fail as f:
            if f.rid is _MISSING:
                self._count_fail(f)
                return None
            if in_batch:
                self._count_fail(f)
                return _err_obj(f.rid, f.error)
            return self._fail_bytes(f)

    def _dispatch_inner(self, msg: dict, session, in_batch: bool):
        rid = msg.get("id", _MISSING)
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or type(method) is not str:
            rid = rid if type(rid) in _ID_TYPES else None
            if msg.get("jsonrpc") != "2.0":
                why = 'member "jsonrpc" must be exactly "2.0"'
            else:
                why = 'member "method" must be a string'
            raise _Fail(rid, RpcError(E.INVALID_REQUEST, "Invalid Request", why), INVALID, "invalid_request")
        notification = rid is _MISSING
        if not notification and type(rid) not in _ID_TYPES:
            raise _Fail(None, RpcError(E.INVALID_REQUEST, "Invalid Request",
                                       'member "id" must be a string, a number or null'),
                        INVALID, "invalid_request")
        params = msg.get("params")
        if params is not None and type(params) is not list and type(params) is not dict:
            raise _Fail(None if notification else rid,
                        RpcError(E.INVALID_REQUEST, "Invalid Request", 'member "params" must be an array or an object'),
                        INVALID, "invalid_request")
        if len(method) > self._max_method:
            raise _Fail(None if notification else rid,
                        LimitExceeded("method_name_length", self._max_method, len(method)),
                        INVALID, "limit")
        spec = self._methods.get(method)
        if spec is None:
            raise _Fail(rid, RpcError(E.METHOD_NOT_FOUND, "Method not found", {"method": method}),
                        UNKNOWN, "not_found")
        if session is not None:
            bucket = session.rate
            if bucket is not None and not bucket.allow():
                raise _Fail(rid, RpcError(E.RATE_LIMITED), spec.name, "rate_limited")
        try:
            args, kwargs = spec.bind(params)
        except RpcError as exc:
            raise _Fail(rid, exc, spec.name, "invalid_params") from None
        if spec.sync_plain and self._no_mw:
            # the common case: a sync method without context or middleware
            if spec.bind_owner:
                args = (getattr(session, "owner", None), *args)
            try:
                result = spec.func(*args, **kwargs) if kwargs else spec.func(*args)
            except Exception as exc:
                err = self._method_error(spec, exc)
                if notification:
                    return None
                return _err_obj(rid, err) if in_batch else _dumps(_err_obj(rid, err))
            spec.calls_ok += 1
            return None if notification else (rid, result)
        ctx = None
        if spec.ctx_param is not None or self.mw.active:
            ctx = RpcContext(session, method, None if notification else rid, notification)
            if spec.ctx_param is not None:
                kwargs = dict(kwargs)
                kwargs[spec.ctx_param] = ctx
        if spec.bind_owner:
            args = (getattr(session, "owner", None), *args)
        if spec.is_async or spec.blocking or self.mw.is_async:
            if not notification and session is not None:
                ids = session.inflight_ids
                key = (type(rid), rid)
                if key in ids:
                    raise _Fail(rid, RpcError(E.INVALID_REQUEST, "Invalid Request",
                                              "a call with this id is already in flight on this connection"),
                                spec.name, "duplicate_id")
                ids[key] = None
            return self._run_async(spec, args, kwargs, rid, notification, ctx, params, session, in_batch)
        # sync fast path
        try:
            if ctx is not None and self.mw.active:
                self.mw.run_before(ctx, params)
            result = spec.func(*args, **kwargs) if kwargs else spec.func(*args)
        except Exception as exc:
            err = self._method_error(spec, exc)
            if ctx is not None and self.mw.active:
                self._after_safe(ctx, None, err)
            if notification:
                return None
            return _err_obj(rid, err) if in_batch else _dumps(_err_obj(rid, err))
        spec.calls_ok += 1
        if ctx is not None and self.mw.active:
            self._after_safe(ctx, result, None)
        if notification:
            return None
        return (rid, result)

    async def _run_async(self, spec, args, kwargs, rid, notification, ctx, params, session, in_batch):
        self.in_flight += 1
        try:
            try:
                if ctx is not None and self.mw.active:
                    await self.mw.arun_before(ctx, params)
                if spec.is_async:
                    result = await spec.func(*args, **kwargs)
                elif spec.blocking:
                    loop = asyncio.get_running_loop()
                    result = await loop.run_in_executor(self.executor, functools.partial(spec.func, *args, **kwargs))
                else:
                    result = spec.func(*args, **kwargs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                err = self._method_error(spec, exc)
                if ctx is not None and self.mw.active:
                    await self._aafter_safe(ctx, None, err)
                if notification:
                    return None
                return _err_obj(rid, err) if in_batch else _dumps(_err_obj(rid, err))
            spec.calls_ok += 1
            if ctx is not None and self.mw.active:
                await self._aafter_safe(ctx, result, None)
            if notification:
                return None
            if in_batch:
                return (rid, result)
            return self._encode((rid, result))
        finally:
            self.in_flight -= 1
            if not notification and session is not None:
                session.inflight_ids.pop((type(rid), rid), None)

    def _encode(self, pair) -> bytes:
        rid, result = pair
        try:
            return _dumps({"jsonrpc": "2.0", "result": result, "id": rid})
        except TypeError as exc:
            log.error("result of a call with id %r is not JSON-serializable: %s", rid, exc)
            return _dumps(_err_obj(rid, RpcError(E.INTERNAL_ERROR, "Internal error",
                                                 "result is not JSON-serializable")))

    def _encode_obj(self, item):
        if type(item) is tuple:
            rid, result = item
            obj = {"jsonrpc": "2.0", "result": result, "id": rid}
            try:
                _dumps(result)
            except TypeError:
                obj = _err_obj(rid, RpcError(E.INTERNAL_ERROR, "Internal error", "result is not JSON-serializable"))
            return obj
        return item

    # -- batches --------------------------------------------------------------------
    def _batch(self, batch: list, session):
        if not batch:
            self._count(INVALID, "invalid_request")
            return error_response(None, E.INVALID_REQUEST, "Invalid Request", "empty batch")
        out = []
        pending = []
        for item in batch:
            if type(item) is not dict:
                self._count(INVALID, "invalid_request")
                out.append(_err_obj(None, RpcError(E.INVALID_REQUEST, "Invalid Request",
                                                   "a request must be a JSON object")))
                continue
            r = self._dispatch(item, session, in_batch=True)
            if r is None:
                continue
            if type(r) is tuple or type(r) is dict:
                out.append(r)
            else:
                out.append(None)  # placeholder for an async result
                pending.append((len(out) - 1, r))
        if pending:
            return self._finish_batch(out, pending)
        return self._encode_batch(out)

    async def _finish_batch(self, out, pending):
        try:
            results = await asyncio.gather(*(c for _, c in pending))
        except BaseException:
            for _, c in pending:
                c.close()
            raise
        for (i, _), r in zip(pending, results):
            out[i] = r
        return self._encode_batch([o for o in out if o is not None])

    def _encode_batch(self, out):
        if not out:
            return None
        return _dumps([self._encode_obj(o) for o in out])

    # -- errors ---------------------------------------------------------------------
    def _method_error(self, spec, exc: Exception) -> RpcError:
        self._errors[spec.name] = self._errors.get(spec.name, 0) + 1
        if isinstance(exc, RpcError):
            return exc
        log.error("rpc method %r raised", spec.name, exc_info=exc)
        data = None
        if self.debug:
            data = {"exception": f"{type(exc).__name__}: {exc}",
                    "traceback": "".join(traceback.format_exception(exc))}
        return RpcError(E.INTERNAL_ERROR, "Internal error", data)

    def _after_safe(self, ctx, result, err):
        try:
            self.mw.run_after(ctx, result, err)
        except Exception:
            log.exception("after_call middleware raised")

    async def _aafter_safe(self, ctx, result, err):
        try:
            await self.mw.arun_after(ctx, result, err)
        except Exception:
            log.exception("after_call middleware raised")

    def _count(self, method: str, outcome: str) -> None:
        key = (method, outcome)
        self._fails[key] = self._fails.get(key, 0) + 1

    def _count_fail(self, f: _Fail) -> None:
        self._count(f.method, f.outcome)

    def _limit_fail(self, msg, exc: LimitExceeded) -> bytes:
        rid = msg.get("id") if type(msg) is dict else None
        if type(rid) not in _ID_TYPES:
            rid = None
        return self._fail_bytes(_Fail(rid, exc, INVALID, "limit"))

    def _fail_bytes(self, f: _Fail) -> bytes | None:
        self._count_fail(f)
        if f.rid is _MISSING:
            return None
        return _dumps(_err_obj(f.rid, f.error))

    # -- sampled, timed twin of handle() --------------------------------------------
    def _handle_timed(self, data, session):
        m = self.metrics
        t0 = perf_counter()
        try:
            msg = self._parse(data)
            t1 = perf_counter()
            flags, opens = self.limits.analyze(data)
            if flags:
                self.limits.check(msg, flags, opens)
            t2 = perf_counter()
            # observed outside the timed windows: an observe() is itself a few µs
            m.h_parse.observe(t1 - t0)
            m.h_validate.observe(t2 - t1)
            t2 = perf_counter()
        except _Fail as f:
            return self._fail_bytes(f)
        except LimitExceeded as exc:
            return self._limit_fail(msg, exc)
        if type(msg) is dict:
            out = self._dispatch(msg, session)
        else:
            out = self._batch(msg, session)
        t3 = perf_counter()
        m.h_dispatch.observe(t3 - t2)
        if type(out) is tuple:
            t3 = perf_counter()
            out = self._encode(out)
            m.h_encode.observe(perf_counter() - t3)
        return out
