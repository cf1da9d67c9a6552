"""``AsyncClient``: the same native core driven from asyncio (or uvloop).

Requests run on the shared tokio runtime; completion is handed to the event loop with
``loop.call_soon_threadsafe``, so any asyncio-compatible loop works and no thread is blocked."""

from __future__ import annotations

import asyncio
import datetime
from time import perf_counter
from typing import Any

from . import _native
from . import exceptions as exc
from ._body import body_to_send
from ._prepare import DEFAULT_REDIRECT_LIMIT, ClientBase
from ._request import PreparedRequest, url_to_send
from .cookies import extract_cookies_to_jar
from .hooks import dispatch_hook
from .metrics import sent
from .models import Response


class _LoopBridge:
    """Completion channel between the native runtime and one event loop: finished requests are
    queued natively and the loop is woken through a socket it watches (``add_reader``), so the I/O
    thread never needs the interpreter lock."""

    __slots__ = ("loop", "completions", "futures", "next_id", "fd")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.completions = _native.Completions()
        self.futures: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.fd = self.completions.fileno()
        loop.add_reader(self.fd, self._drain)

    def _drain(self) -> None:
        futures = self.futures
        for rid, resp, error in self.completions.drain():
            fut = futures.pop(rid, None)
            if fut is None or fut.done():  # cancelled meanwhile
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(resp)

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.remove_reader(self.fd)


class AsyncClient(ClientBase):
    """``async with AsyncClient() as c: r = await c.get(url)``. Bodies are read fully before the
    awaitable completes (``r.content``/``r.json()`` then need no I/O)."""

    def __init__(self, *, headers: Any = None, cookies: Any = None, auth: Any = None, params: Any = None,
                 timeout: Any = None, total_timeout: float | None = None, verify: bool | str = True,
                 proxies: Any = None, trust_env: bool = True, max_redirects: int = DEFAULT_REDIRECT_LIMIT,
                 follow_redirects: bool = True, pool_maxsize: int = 128,
                 pool_idle_timeout: float | None = 90.0, metrics: Any = None, http2: bool = False) -> None:
        super().__init__(headers=headers, cookies=cookies, auth=auth, params=params, timeout=timeout,
                         total_timeout=total_timeout, verify=verify, proxies=proxies, trust_env=trust_env,
                         max_redirects=max_redirects, pool_maxsize=pool_maxsize,
                         pool_idle_timeout=pool_idle_timeout, metrics=metrics, http2=http2)
        self.follow_redirects = follow_redirects
        self._native = self._new_native()
        self._closed = False
        self._bridge: _LoopBridge | None = None

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *args: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None
        self._native = self._new_native()  # let go of the pools (idle connections close)

    async def request(self, method: str, url: Any, *, params: Any = None, data: Any = None, headers: Any = None,
                      cookies: Any = None, files: Any = None, auth: Any = None, timeout: Any = None,
                      allow_redirects: bool | None = None, follow_redirects: bool | None = None,
                      proxies: Any = None, verify: Any = None, json: Any = None, hooks: Any = None,
                      cert: Any = None) -> Response:
        if self._closed:
            raise RuntimeError("this AsyncClient is closed")
        follow = follow_redirects if follow_redirects is not None else allow_redirects
        if follow is None:
            follow = self.follow_redirects
        prep = self._prepare_call(method, url, params, data, headers, cookies, files, auth, hooks, json)[0]
        opts = self.native_options(timeout, verify, proxies, cert)
        # what response hooks get, as from Session.send
        kw = {"stream": False, "timeout": timeout if timeout is not None else self.timeout,
              "verify": opts[3], "cert": opts[5], "proxies": {**self.proxies, **(proxies or {})}}
        resp = await self._send_hop(prep, opts, kw)
        if follow and resp.status_code in (301, 302, 303, 307, 308) and resp.is_redirect:
            history: list[Response] = []
            chain = self.redirect_cookies(prep._own_cookies)
            while resp.is_redirect:
                if len(history) >= self.max_redirects:
                    raise exc.TooManyRedirects(f"Exceeded {self.max_redirects} redirects.", response=resp)
                history.append(resp)
                prep = self.redirect_request(resp, prep, chain)
                resp = await self._send_hop(prep, opts, kw)
                resp.history = list(history)
        return resp

    async def _send_hop(self, prep: PreparedRequest, opts: tuple[Any, ...], kw: dict[str, Any]) -> Response:
        resp = await self._send(prep, opts)
        hooks = prep.hooks
        if hooks and hooks.get("response"):
            resp = dispatch_hook("response", hooks, resp, **kw)
        return resp

    async def _send(self, prep: PreparedRequest, opts: tuple[Any, ...]) -> Response:
        connect, read, total, verify, plist, cert = opts
        if cert is not None and prep.url[:6].lower() != "https:":
            cert = None  # plain http has no handshake to present it in
        loop = asyncio.get_running_loop()
        bridge = self._bridge
        if bridge is None or bridge.loop is not loop:
            if bridge is not None:
                bridge.close()
            bridge = self._bridge = _LoopBridge(loop)
        rid = bridge.next_id = bridge.next_id + 1
        fut = loop.create_future()
        rec = self._recorder
        t0 = perf_counter()
        body = prep.body
        if body is not None and body.__class__ is not bytes:
            body = body_to_send(body)  # a str (form data), or a stream read here
        pending = self._native.start(bridge.completions, rid, prep.method, url_to_send(prep.url),
                                     list(prep.headers._store.values()), body,
                                     connect, read, total, verify, plist, rec is not None, cert)
        bridge.futures[rid] = fut
        try:
            native = await fut
        except asyncio.CancelledError:
            pending.cancel()
            bridge.futures.pop(rid, None)
            raise
        except exc.RequestException as e:
            e.request = prep
            if rec is not None and sent(e):
                rec.failed(prep.method, prep.url, perf_counter() - t0, e)
            raise
        elapsed = perf_counter() - t0
        if rec is not None:
            rec.record(prep.method, prep.url, native.status, elapsed, native.timings)
        resp = Response(native, prep, datetime.timedelta(seconds=elapsed))
        if native.has_set_cookie:
            extract_cookies_to_jar(self.cookies, prep, resp)
        return resp

    async def get(self, url: Any, **kwargs: Any) -> Response:
        return await self.request("GET", url, **kwargs)

    async def options(self, url: Any, **kwargs: Any) -> Response:
        return await self.request("OPTIONS", url, **kwargs)

    async def head(self, url: Any, **kwargs: Any) -> Response:
        kwargs.setdefault("allow_redirects", False)
        return await self.request("HEAD", url, **kwargs)

    async def post(self, url: Any, **kwargs: Any) -> Response:
        return await self.request("POST", url, **kwargs)

    async def put(self, url: Any, **kwargs: Any) -> Response:
        return await self.request("PUT", url, **kwargs)

    async def patch(self, url: Any, **kwargs: Any) -> Response:
        return await self.request("PATCH", url, **kwargs)

    async def delete(self, url: Any, **kwargs: Any) -> Response:
        return await self.request("DELETE", url, **kwargs)
