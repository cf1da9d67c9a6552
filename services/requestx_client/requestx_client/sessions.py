"""``Session``: persistent settings, cookies and a connection pool shared by every thread using it."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from . import exceptions as exc
from ._prepare import DEFAULT_REDIRECT_LIMIT, ClientBase
from .cookies import extract_cookies_to_jar
from .metrics import sent
from .models import REDIRECT_STATI, PreparedRequest, Response


class Session(ClientBase):
    """A requests-compatible session. Safe to share between threads (the native pool is locked
    internally and the interpreter lock is released while waiting on the network)."""

    def __init__(self, *, headers: Any = None, cookies: Any = None, auth: Any = None, params: Any = None,
                 timeout: Any = None, total_timeout: float | None = None, verify: bool | str = True,
                 proxies: Any = None, trust_env: bool = True, max_redirects: int = DEFAULT_REDIRECT_LIMIT,
                 pool_maxsize: int = 32, pool_idle_timeout: float | None = 90.0, max_body_size: int | None = None,
                 max_decoded_size: int | None = None, metrics: Any = None) -> None:
        super().__init__(headers=headers, cookies=cookies, auth=auth, params=params, timeout=timeout,
                         total_timeout=total_timeout, verify=verify, proxies=proxies, trust_env=trust_env,
                         max_redirects=max_redirects, pool_maxsize=pool_maxsize,
                         pool_idle_timeout=pool_idle_timeout, max_body_size=max_body_size,
                         max_decoded_size=max_decoded_size, metrics=metrics)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the idle connections of this session (it stays usable: new ones are opened on demand)."""
        self._drop_pools()

    def clone(self) -> "Session":
        """A new session with copies of the settings, sharing this one's connection pools."""
        new = Session.__new__(Session)
        new.__dict__.update(self.__dict__)
        new.headers = self.headers.copy()
        new.cookies = self.cookies.copy()
        new.params = self.params.copy() if hasattr(self.params, "copy") else self.params
        new.proxies = dict(self.proxies)
        new.hooks = {k: list(v) for k, v in self.hooks.items()}
        new._native = self._native.clone_handle()
        return new

    def request(self, method: str, url: Any, params: Any = None, data: Any = None, headers: Any = None,
                cookies: Any = None, files: Any = None, auth: Any = None, timeout: Any = None,
                allow_redirects: bool = True, proxies: Any = None, hooks: Any = None, stream: bool | None = None,
                verify: Any = None, cert: Any = None, json: Any = None) -> Response:
        prep = self.prepare(method, url, params, data, headers, cookies, files, auth, json)
        if timeout is None and verify is None and proxies is None and cert is None and self._plain_options():
            opts: tuple[Any, ...] = (None, None, self.total_timeout, self._env_bundle or True, None)
        else:
            opts = self.native_options(timeout, verify, proxies, cert)
        stream = self.stream if stream is None else stream
        resp = self._send(prep, opts, stream)
        if allow_redirects and resp.status_code in REDIRECT_STATI and resp.is_redirect:
            history: list[Response] = []
            chain = self.redirect_cookies(cookies)
            while resp.is_redirect:
                if len(history) >= self.max_redirects:
                    raise exc.TooManyRedirects(f"Exceeded {self.max_redirects} redirects.", response=resp)
                _drain(resp)
                history.append(resp)
                prep = self.redirect_request(resp, prep, chain)
                resp = self._send(prep, opts, stream)
                resp.history = list(history)
        if hooks or self.hooks.get("response"):
            resp = self.run_hooks(hooks, resp)
        return resp

    def send(self, request: PreparedRequest, *, stream: bool = False, timeout: Any = None, verify: Any = None,
             proxies: Any = None, cert: Any = None, allow_redirects: bool = True, **kwargs: Any) -> Response:
        """Send a ``PreparedRequest`` (from ``Session.prepare``) as is."""
        return self._send(request, self.native_options(timeout, verify, proxies, cert), stream)

    def _send(self, prep: PreparedRequest, opts: tuple[Any, ...], stream: bool) -> Response:
        connect, read, total, verify, plist = opts
        rec = self._recorder
        t0 = perf_counter()
        try:
            native = self._native.request(prep.method, prep.url, list(prep.headers._store.values()),
                                          prep.body, connect, read, total, verify, plist, stream, rec is not None)
        except exc.RequestException as e:
            e.request = prep
            if rec is not None and sent(e):
                rec.failed(prep.method, prep.url, perf_counter() - t0, e)
            raise
        elapsed = perf_counter() - t0
        if rec is not None:
            rec.record(prep.method, prep.url, native.status, elapsed, native.timings)
        resp = Response(native, prep, elapsed)
        if native.has_set_cookie and self._keep_cookies:
            extract_cookies_to_jar(self.cookies, prep, resp)
        return resp

    def get(self, url: Any, params: Any = None, **kwargs: Any) -> Response:
        # allow_redirects defaults to True in request(), as requests' get() sets it
        if kwargs:
            return self.request("GET", url, params, **kwargs)
        return self.request("GET", url, params)

    def options(self, url: Any, **kwargs: Any) -> Response:
        return self.request("OPTIONS", url, **kwargs)

    def head(self, url: Any, **kwargs: Any) -> Response:
        kwargs.setdefault("allow_redirects", False)
        return self.request("HEAD", url, **kwargs)

    def post(self, url: Any, data: Any = None, json: Any = None, **kwargs: Any) -> Response:
        return self.request("POST", url, data=data, json=json, **kwargs)

    def put(self, url: Any, data: Any = None, **kwargs: Any) -> Response:
        return self.request("PUT", url, data=data, **kwargs)

    def patch(self, url: Any, data: Any = None, **kwargs: Any) -> Response:
        return self.request("PATCH", url, data=data, **kwargs)

    def delete(self, url: Any, **kwargs: Any) -> Response:
        return self.request("DELETE", url, **kwargs)


def _drain(resp: Response) -> None:
    """Read a redirect response's body so its connection goes back to the pool."""
    try:
        resp._native.body_len()
    except (exc.ChunkedEncodingError, exc.ContentDecodingError, exc.ReadTimeout):
        resp._native.close()


def session(**kwargs: Any) -> Session:
    """Return a new ``Session``."""
    return Session(**kwargs)
