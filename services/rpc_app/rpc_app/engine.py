"""The transport-agnostic JSON-RPC 2.0 engine: bytes in -> bytes out.

``Engine.handle(data, session)`` returns, without awaiting anything when it can:

* ``bytes``: the response to send (single response or batch array);
* ``None``: nothing to send (notification, batch of notifications);
* a coroutine: the call is async (async method, blocking method in a thread, async middleware);
  await it to get ``bytes`` or ``None``.

Sync methods thus cost no task and no await. Stages: parse (orjson) -> validate (limits) ->
dispatch (lookup, params binding, call) -> encode (orjson). Every async call, alone or in a batch,
holds one of its connection's ``max_in_flight`` slots while it runs, and ends at its deadline.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import traceback
from concurrent.futures import Executor, ThreadPoolExecutor
from time import perf_counter
from typing import Any, Callable

import orjson

from . import errors as E
from .context import RpcContext
from .deadlines import Deadlines
from .errors import LimitExceeded, RpcError
from .limits import Limits
from .middleware import MiddlewareChain
from .registry import Registry

log = logging.getLogger("rpc_app")

_loads = orjson.loads
try:  # the running task of a loop, without asyncio.current_task()'s loop lookup (3.11's C dict)
    from asyncio.tasks import _current_tasks as _TASKS
except ImportError:  # pragma: no cover - other Python versions
    _TASKS = None
_JSONDecodeError = orjson.JSONDecodeError
_MISSING = object()



class _BigInt(int):
    """An integer id beyond 64 bits: orjson can neither read it exactly nor write it, so it is read again by
    the standard library and written as raw JSON text. An int for everything else (methods, duplicate checks)."""

    __slots__ = ()

    def wire(self) -> orjson.Fragment:
        return orjson.Fragment(str(int(self)).encode())


_ID_TYPES = (str, int, float, type(None), _BigInt)
_INT64 = (-(1 << 63), (1 << 64) - 1)  # what orjson reads and writes as an integer

UNKNOWN = "(unknown)"
INVALID = "(invalid)"
DISCOVER = "rpc.discover"


def error_response(rid: Any, code: int, message: str | None = None, data: Any = None) -> bytes:
    err = {"code": code, "message": message if message is not None else E.MESSAGES.get(code, "Server error")}
    if data is not None:
        err["data"] = data
    return orjson.dumps({"jsonrpc": "2.0", "error": err, "id": rid})


def _err_obj(rid, exc: RpcError) -> dict:
    return {"jsonrpc": "2.0", "error": exc.to_dict(), "id": rid.wire() if type(rid) is _BigInt else rid}


def _exact_ids(data, msg) -> None:
    """orjson reads an integer beyond 64 bits as a float: read the ids again exactly (stdlib json keeps big
    integers) and keep those orjson cannot write as raw JSON, so that every id comes back unchanged."""
    exact = json.loads(data)
    pairs = [(msg, exact)] if type(msg) is dict else zip(msg, exact)
    for item, twin in pairs:
        if type(item) is dict and type(item.get("id")) is float and type(twin.get("id")) is int:
            rid = twin["id"]
            item["id"] = rid if _INT64[0] <= rid <= _INT64[1] else _BigInt(rid)


def _plain_ints(obj):
    """A copy of a JSON-like value with every int beyond 64 bits turned into _BigInt (so that orjson's
    subclass pass-through hands it to the encoder hook)."""
    t = type(obj)
    if t is int:
        return obj if _INT64[0] <= obj <= _INT64[1] else _BigInt(obj)
    if t is dict:
        return {k: _plain_ints(v) for k, v in obj.items()}
    if t is list or t is tuple:
        return [_plain_ints(v) for v in obj]
    return obj


def _has_float_id(msg) -> bool:
    if type(msg) is dict:
        return type(msg.get("id")) is float
    return any(type(m) is dict and type(m.get("id")) is float for m in msg)


class _Fail(Exception):
    """Internal: a request-level error with the id to answer (None when unknown, _MISSING: notification)."""

    __slots__ = ("rid", "error", "method", "outcome")

    def __init__(self, rid, error: RpcError, method: str, outcome: str):
        self.rid = rid
        self.error = error
        self.method = method
        self.outcome = outcome


class Engine:
    """Options: ``call_timeout`` (seconds, the default deadline of async and blocking calls; None: none),
    ``default`` (orjson's hook for result types it does not know, e.g. ``Decimal``), ``run_sync`` (an async
    ``run_sync(func, args, kwargs)`` for blocking methods; default: a thread pool), ``sync_in_thread`` (run
    every sync method through ``run_sync``: Django's ORM refuses to run on the event loop), ``discover``
    (answer ``rpc.discover`` with an OpenRPC document) and ``info`` (its title, version, description)."""

    def __init__(self, registry: Registry, *, limits: Limits | None = None, middleware=(),
                 debug: bool = False, metrics=None, executor: Executor | None = None, rate_limit=None,
                 call_timeout: float | None = 300.0, default: Callable[[Any], Any] | None = None,
                 run_sync=None, sync_in_thread: bool = False, discover: bool = True, info: dict | None = None):
        if call_timeout is not None and not call_timeout > 0:
            raise ValueError("call_timeout must be a positive number of seconds or None")
        self.registry = registry
        self.limits = limits or Limits()
        self.mw = MiddlewareChain(middleware)
        self.debug = debug
        self.metrics = metrics
        self._executor = executor
        self.rate_limit = rate_limit
        self.call_timeout = call_timeout
        self._deadlines = Deadlines()
        self._default = default
        self._dumps = functools.partial(orjson.dumps, default=default) if default else orjson.dumps
        self._run_sync = run_sync or self._run_in_executor
        self._discover = discover
        self.info = dict(info or {})
        self._counter = 0
        self._methods = registry._methods  # shared: methods added later are seen
        self._max_method = self.limits.max_method_name_length
        self._max_response = self.limits.max_response_bytes
        self._max_batch = self.limits.max_batch_length
        self._small = self.limits._small
        self.set_sync_in_thread(sync_in_thread)
        self.in_flight = 0  # async calls running (exported as rpc_in_flight)
        self._fails: dict[tuple[str, str], int] = {}
        self._errors: dict[str, int] = {}
        if metrics is not None:
            metrics.attach(self)
            self._mask = metrics.sample_mask
            self._call_timers: dict | None = {}  # spec -> observe(seconds) of its rpc_call_duration_seconds
        else:
            self._mask = -1  # never sample
            self._call_timers = None

    # -- public ---------------------------------------------------------------------
    def handle(self, data, session=None):
        """One WebSocket message in (bytes or str); bytes / None / coroutine out."""
        self._counter += 1
        if self._counter & self._mask == 0:
            return self._handle_timed(data, session)
        if len(data) <= self._small:
            # the common case, inlined: a small request object (no size limit can be broken)
            try:
                msg = _loads(data)
            except _JSONDecodeError:
                msg = None  # the general path words the error
            if type(msg) is dict:
                if type(msg.get("id")) is float:
                    _exact_ids(data, msg)
                try:
                    out = self._call(msg, session, False)
                except _Fail as f:
                    return self._fail_bytes(f)
                if type(out) is tuple and type(out[0]) is not _BigInt:
                    try:
                        raw = self._dumps({"jsonrpc": "2.0", "result": out[1], "id": out[0]})
                    except TypeError:
                        return self._encode(out)
                    return raw if len(raw) <= self._max_response else self._encode(out)
                if type(out) is tuple:
                    return self._encode(out)
                return out
            if type(msg) is list:  # a small batch: no limit can be broken either
                if _has_float_id(msg):
                    _exact_ids(data, msg)
                return self._batch(msg, session)
        try:
            msg = self._parse(data)
            self._validate(data, msg)
        except _Fail as f:
            return self._fail_bytes(f)
        if type(msg) is dict:
            return self._single(msg, session)
        return self._batch(msg, session)

    async def handle_async(self, data, session=None):
        """Convenience: always awaitable."""
        out = self.handle(data, session)
        if out is None or type(out) is bytes:
            return out
        return await out

    def set_sync_in_thread(self, flag: bool) -> None:
        """Run every sync method through ``run_sync`` (True) or inline on the event loop (False)."""
        self._sync_in_thread = bool(flag)
        self._inline_sync = not self.mw.active and not self.mw.is_async and not flag
        self._always_async = self.mw.is_async or bool(flag)

    def encode_notification(self, method: str, params: Any = None) -> bytes:
        """A server -> client notification (push), encoded with this engine's encoder."""
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return self._dumps(msg)

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

    # -- parse and validate -----------------------------------------------------------
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
        if _has_float_id(msg):
            _exact_ids(data, msg)
        return msg

    def _validate(self, data, msg) -> None:
        if type(msg) is list and len(msg) > self._max_batch:
            raise _Fail(None, LimitExceeded("batch_length", self._max_batch, len(msg)), INVALID, "limit")
        flags, opens = self.limits.analyze(data)
        if flags:
            try:
                self.limits.check(msg, flags, opens)
            except LimitExceeded as exc:
                rid = msg.get("id", _MISSING) if type(msg) is dict else None  # a notification gets no answer
                raise _Fail(rid if rid is _MISSING or type(rid) in _ID_TYPES else None, exc, INVALID, "limit") from None

    # -- dispatch ---------------------------------------------------------------------
    def _single(self, msg: dict, session):
        try:
            out = self._call(msg, session, False)
        except _Fail as f:
            return self._fail_bytes(f)
        if type(out) is tuple:
            return self._encode(out)
        return out

    def _call(self, msg: dict, session, in_batch: bool):
        """Validate one request object and call it.

        Returns (rid, result) on sync success, an error response (bytes; a dict in a batch), None
        (notification) or a coroutine (async path). Raises _Fail for a request-level error.
        """
        rid = msg.get("id", _MISSING)
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or type(method) is not str:
            why = ('member "jsonrpc" must be exactly "2.0"' if msg.get("jsonrpc") != "2.0"
                   else 'member "method" must be a string')
            raise _Fail(rid if type(rid) in _ID_TYPES else None,
                        RpcError(E.INVALID_REQUEST, "Invalid Request", why), INVALID, "invalid_request")
        notification = rid is _MISSING
        if not notification and type(rid) not in _ID_TYPES:
            raise _Fail(None, RpcError(E.INVALID_REQUEST, "Invalid Request",
                                       'member "id" must be a string, a number or null'),
                        INVALID, "invalid_request")
        params = msg.get("params", _MISSING)
        if params is _MISSING:
            params = None
        elif type(params) is not list and type(params) is not dict:
            raise _Fail(None if notification else rid,
                        RpcError(E.INVALID_REQUEST, "Invalid Request",
                                 'member "params" must be an array or an object (or left out)'),
                        INVALID, "invalid_request")
        if len(method) > self._max_method:
            raise _Fail(None if notification else rid,
                        LimitExceeded("method_name_length", self._max_method, len(method)), INVALID, "limit")
        spec = self._methods.get(method)
        if spec is None:
            if method == DISCOVER and self._discover:
                return None if notification else (rid, self._document())
            raise _Fail(rid, RpcError(E.METHOD_NOT_FOUND, "Method not found", {"method": method}),
                        UNKNOWN, "not_found")
        if session is not None:
            if session.draining:
                raise _Fail(rid, RpcError(E.SERVER_SHUTTING_DOWN), spec.name, "shutting_down")
            bucket = session.rate
            if bucket is not None and not bucket.allow():
                raise _Fail(rid, RpcError(E.RATE_LIMITED), spec.name, "rate_limited")
        try:
            args, kwargs = spec.bind(params)
        except RpcError as exc:
            raise _Fail(rid, exc, spec.name, "invalid_params") from None
        if spec.bind_owner:
            args = (getattr(session, "owner", None), *args)
        if spec.sync_plain and self._inline_sync:
            # the common case: a sync method without context or middleware
            timers = self._call_timers
            t0 = perf_counter() if timers is not None else 0.0
            try:
                result = spec.func(*args, **kwargs) if kwargs else spec.func(*args)
            except Exception as exc:
                if timers is not None:
                    (timers.get(spec) or self._call_timer(spec))(perf_counter() - t0)
                return self._error_out(self._method_error(spec, exc), rid, notification, in_batch)
            spec.calls_ok += 1
            if timers is not None:
                (timers.get(spec) or self._call_timer(spec))(perf_counter() - t0)
            return None if notification else (rid, result)
        ctx = None
        if spec.ctx_param is not None or self.mw.active:
            ctx = RpcContext(session, method, None if notification else rid, notification)
            if spec.ctx_param is not None:
                kwargs = dict(kwargs)
                kwargs[spec.ctx_param] = ctx
        if spec.is_async or spec.blocking or self._always_async:
            if not notification and session is not None:
                key = (type(rid), rid)
                if key in session.inflight_ids:
                    raise _Fail(rid, RpcError(E.INVALID_REQUEST, "Invalid Request",
                                              "a call with this id is already in flight on this connection"),
                                spec.name, "duplicate_id")
                session.inflight_ids[key] = None
            return self._run_async(spec, args, kwargs, rid, notification, ctx, params, session, in_batch)
        return self._run_sync_inline(spec, args, kwargs, rid, notification, ctx, params, in_batch)

    def _run_sync_inline(self, spec, args, kwargs, rid, notification, ctx, params, in_batch):
        """A sync method with middleware or an RpcContext, on the event loop."""
        if self._call_timers is not None:
            t0 = perf_counter()
            try:
                return self._run_sync_inline_untimed(spec, args, kwargs, rid, notification, ctx, params, in_batch)
            finally:
                (self._call_timers.get(spec) or self._call_timer(spec))(perf_counter() - t0)
        return self._run_sync_inline_untimed(spec, args, kwargs, rid, notification, ctx, params, in_batch)

    def _run_sync_inline_untimed(self, spec, args, kwargs, rid, notification, ctx, params, in_batch):
        try:
            if self.mw.active:
                self.mw.run_before(ctx, params)
            result = spec.func(*args, **kwargs)
        except Exception as exc:
            err = self._method_error(spec, exc)
            if self.mw.active:
                self._after_safe(ctx, None, err)
            return self._error_out(err, rid, notification, in_batch)
        spec.calls_ok += 1
        if self.mw.active:
            self._after_safe(ctx, result, None)
        return None if notification else (rid, result)

    async def _run_async(self, spec, args, kwargs, rid, notification, ctx, params, session, in_batch):
        t0 = perf_counter() if self._call_timers is not None else 0.0
        slots = session.slots if session is not None else None
        limit = spec.timeout or self.call_timeout
        task = None
        try:
            if slots is not None and not slots.try_take():
                await slots.take()  # every async call holds a slot, batch members included
            self.in_flight += 1
            if limit is not None:
                loop = (session.loop if session is not None else None) or asyncio.get_running_loop()
                task = _TASKS.get(loop) if _TASKS is not None else asyncio.current_task(loop)
                self._deadlines.start(task, limit, loop)
            try:
                result = await self._invoke(spec, args, kwargs, ctx, params)
            except asyncio.CancelledError:
                if task is None or not self._deadlines.end(task, limit):
                    raise  # the connection went: nobody to answer
                task.uncancel()  # cancelled by its deadline: answer -32003
                return await self._failed(spec, RpcError(E.CALL_TIMEOUT, "Call timed out", {"timeout": limit}),
                                          ctx, rid, notification, in_batch)
            except Exception as exc:
                return await self._failed(spec, exc, ctx, rid, notification, in_batch)
            finally:
                self.in_flight -= 1
                if slots is not None:
                    slots.release()
                if task is not None:
                    self._deadlines.end(task, limit)
            spec.calls_ok += 1
            if ctx is not None and self.mw.active:
                await self._aafter_safe(ctx, result, None)
            if notification:
                return None
            return (rid, result) if in_batch else self._encode((rid, result))
        finally:
            if not notification and session is not None:
                session.inflight_ids.pop((type(rid), rid), None)
            if self._call_timers is not None:
                (self._call_timers.get(spec) or self._call_timer(spec))(perf_counter() - t0)

    def _invoke(self, spec, args, kwargs, ctx, params):
        """The method's awaitable (a coroutine of the method itself when nothing else is needed)."""
        if spec.is_async and not (ctx is not None and self.mw.active):
            return spec.func(*args, **kwargs)
        return self._invoke_general(spec, args, kwargs, ctx, params)

    async def _invoke_general(self, spec, args, kwargs, ctx, params):
        if ctx is not None and self.mw.active:
            await self.mw.arun_before(ctx, params)
        if spec.is_async:
            return await spec.func(*args, **kwargs)
        if spec.blocking or self._sync_in_thread:
            return await self._run_sync(spec.func, args, kwargs)
        return spec.func(*args, **kwargs)

    async def _failed(self, spec, exc, ctx, rid, notification, in_batch):
        err = self._method_error(spec, exc)
        if ctx is not None and self.mw.active:
            await self._aafter_safe(ctx, None, err)
        return self._error_out(err, rid, notification, in_batch)

    async def _run_in_executor(self, func, args, kwargs):
        # the thread cannot be stopped at the deadline: the call is answered, the thread runs on
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(func, *args, **kwargs))

    def _document(self) -> dict:
        from .openrpc import document
        return document(self.registry, **self.info)

    # -- encode -----------------------------------------------------------------------
    def _encode(self, pair) -> bytes:
        rid, result = pair
        if type(rid) is _BigInt:
            rid = rid.wire()
        try:
            out = self._dumps({"jsonrpc": "2.0", "result": result, "id": rid})
        except TypeError as exc:
            out = self._dumps_big_ints({"jsonrpc": "2.0", "result": result, "id": rid}, exc)
            if out is None:
                return self._dumps(self._unencodable(rid, exc))
        if len(out) > self._max_response:
            return self._dumps(_err_obj(rid, LimitExceeded("response_bytes", self._max_response, len(out))))
        return out

    def _dumps_big_ints(self, obj, exc: TypeError) -> bytes | None:
        """A result holding a big id (ctx.request_id echoed back) or another integer beyond 64 bits: encode
        it as raw JSON text. Only on this error path, so the common encode pays nothing."""
        if "64-bit" not in str(exc):
            return None
        default = self._default

        def wide(value):
            if isinstance(value, int) and not isinstance(value, bool):
                return orjson.Fragment(str(int(value)).encode())
            for base in (str, dict, list, tuple, float):  # other subclasses, passed through by the option
                if isinstance(value, base):
                    return base(value)
            if default is None:
                raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")
            return default(value)
        try:
            return orjson.dumps(_plain_ints(obj), default=wide, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
        except TypeError:
            return None

    def _unencodable(self, rid, exc) -> dict:
        log.error("result of a call with id %r is not JSON-serializable: %s", rid, exc)
        return _err_obj(rid, RpcError(E.INTERNAL_ERROR, "Internal error", "result is not JSON-serializable"))

    def _encode_member(self, item, room: int) -> bytes:
        if type(item) is tuple:
            rid = item[0].wire() if type(item[0]) is _BigInt else item[0]
            item = {"jsonrpc": "2.0", "result": item[1], "id": rid}
        else:
            rid = item.get("id")
        try:
            out = self._dumps(item)
        except TypeError as exc:
            out = self._dumps_big_ints(item, exc)
            if out is None:
                return self._dumps(self._unencodable(rid, exc))
        if len(out) > room:  # the whole batch answer must stay under max_response_bytes
            return self._dumps(_err_obj(rid, LimitExceeded("response_bytes", self._max_response)))
        return out

    # -- batches ----------------------------------------------------------------------
    def _batch(self, batch: list, session):
        if not batch:
            self._count(INVALID, "invalid_request")
            return error_response(None, E.INVALID_REQUEST, "Invalid Request", "empty batch")
        out, pending = [], []
        for item in batch:
            r = self._batch_member(item, session)
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

    def _batch_member(self, item, session):
        if type(item) is not dict:
            self._count(INVALID, "invalid_request")
            return _err_obj(None, RpcError(E.INVALID_REQUEST, "Invalid Request", "a request must be a JSON object"))
        try:
            return self._call(item, session, True)
        except _Fail as f:
            self._count_fail(f)
            return None if f.rid is _MISSING else _err_obj(f.rid, f.error)

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
        parts, size = [], 2
        for item in out:
            part = self._encode_member(item, self._max_response - size - len(parts))
            parts.append(part)
            size += len(part)
        return b"[" + b",".join(parts) + b"]"

    # -- errors -----------------------------------------------------------------------
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

    def _error_out(self, err: RpcError, rid, notification: bool, in_batch: bool):
        if notification:
            return None
        return _err_obj(rid, err) if in_batch else self._dumps(_err_obj(rid, err))

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

    def _call_timer(self, spec):
        timer = self._call_timers[spec] = self.metrics.call_timer(spec.name)
        return timer

    def _count(self, method: str, outcome: str) -> None:
        key = (method, outcome)
        self._fails[key] = self._fails.get(key, 0) + 1

    def _count_fail(self, f: _Fail) -> None:
        self._count(f.method, f.outcome)

    def _fail_bytes(self, f: _Fail) -> bytes | None:
        self._count_fail(f)
        if f.rid is _MISSING:
            return None
        return self._dumps(_err_obj(f.rid, f.error))

    # -- sampled: the same stages, timed ----------------------------------------------
    def _handle_timed(self, data, session):
        m = self.metrics
        t0 = perf_counter()
        try:
            msg = self._parse(data)
            t1 = perf_counter()
            self._validate(data, msg)
            t2 = perf_counter()
        except _Fail as f:
            return self._fail_bytes(f)
        # observed outside the timed windows: an observe() is itself a few µs
        m.observe_hot("parse", t1 - t0)
        m.observe_hot("validate", t2 - t1)
        t2 = perf_counter()
        if type(msg) is not dict:
            out = self._batch(msg, session)
            m.observe_hot("dispatch", perf_counter() - t2)
            return out
        try:
            out = self._call(msg, session, False)
        except _Fail as f:
            out = self._fail_bytes(f)
        t3 = perf_counter()
        m.observe_hot("dispatch", t3 - t2)
        if type(out) is tuple:
            t3 = perf_counter()
            out = self._encode(out)
            m.observe_hot("encode", perf_counter() - t3)
        return out
