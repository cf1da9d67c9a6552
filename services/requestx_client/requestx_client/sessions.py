"""``Session``: persistent settings, cookies and connection pools (in its adapters), shared by every
thread using it. ``request()`` is ``prepare_request()`` + ``merge_environment_settings()`` + ``send()``,
as in requests; ``send()`` follows redirects and runs the response hooks on every hop."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from . import exceptions as exc
from ._prepare import DEFAULT_REDIRECT_LIMIT, ClientBase
from ._proxies import environ_proxies, resolve_proxies
from ._redirects import RedirectRules, SessionRedirectMixin
from ._request import PreparedRequest, Request, merge_setting
from .adapters import BaseAdapter, HTTPAdapter, current_recorder, split_timeout
from .cookies import extract_cookies_to_jar
from .hooks import dispatch_hook
from .models import REDIRECT_STATI, Response
from .utils import env_ca_bundle, get_netrc_auth  # noqa: F401  (requests.sessions has get_netrc_auth)

__all__ = ["Session", "SessionRedirectMixin", "session"]


class Session(ClientBase, SessionRedirectMixin):
    """A requests-compatible session. Safe to share between threads (the native pool is locked
    internally and the interpreter lock is released while waiting on the network)."""

    def __init__(self, *, headers: Any = None, cookies: Any = None, auth: Any = None, params: Any = None,
                 timeout: Any = None, total_timeout: float | None = None, verify: bool | str = True,
                 proxies: Any = None, trust_env: bool = True, max_redirects: int = DEFAULT_REDIRECT_LIMIT,
                 pool_maxsize: int = 32, pool_idle_timeout: float | None = 90.0, max_body_size: int | None = None,
                 max_decoded_size: int | None = None, metrics: Any = None, http2: bool = False) -> None:
        super().__init__(headers=headers, cookies=cookies, auth=auth, params=params, timeout=timeout,
                         total_timeout=total_timeout, verify=verify, proxies=proxies, trust_env=trust_env,
                         max_redirects=max_redirects, pool_maxsize=pool_maxsize,
                         pool_idle_timeout=pool_idle_timeout, max_body_size=max_body_size,
                         max_decoded_size=max_decoded_size, metrics=metrics, http2=http2)
        # one adapter (so one set of pools) for both schemes, with the session's pool settings
        self._adapter = HTTPAdapter(pool_maxsize=pool_maxsize, pool_idle_timeout=pool_idle_timeout,
                                    max_body_size=max_body_size, max_decoded_size=max_decoded_size, http2=http2)
        self.adapters: OrderedDict[str, BaseAdapter] = OrderedDict()
        self.mount("https://", self._adapter)
        self.mount("http://", self._adapter)

    # whether a subclass overrides get_redirect_target (then every answer is offered to it)
    _custom_target = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._custom_target = cls.get_redirect_target is not RedirectRules.get_redirect_target

    def _netrc_auth(self, url: str) -> tuple[str, str] | None:
        # through this module's name, which callers (and requests' tests) replace to supply credentials
        return get_netrc_auth(url)

    @property
    def _native(self) -> Any:
        """The native client of the session's own adapter (its connection pools)."""
        return self._adapter._client

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the idle connections of every adapter (the session stays usable: new ones are opened on
        demand)."""
        for adapter in {id(a): a for a in self.adapters.values()}.values():
            adapter.close()

    def clone(self) -> "Session":
        """A new session with copies of the settings, sharing this one's connection pools."""
        new = Session.__new__(Session)
        new.__dict__.update(self.__dict__)
        new.headers = self.headers.copy()
        new.cookies = self.cookies.copy()
        new.params = self.params.copy() if hasattr(self.params, "copy") else self.params
        new.proxies = dict(self.proxies)
        new.hooks = {k: list(v) for k, v in self.hooks.items()}
        new._adapter = self._adapter._sharing_pools()
        new.adapters = OrderedDict((p, new._adapter if a is self._adapter else a) for p, a in self.adapters.items())
        return new

    # --- adapters ---
    def mount(self, prefix: str, adapter: BaseAdapter) -> None:
        """Send the URLs that start with ``prefix`` (case-insensitively) through ``adapter``; the longest
        matching prefix wins."""
        self.adapters[prefix] = adapter
        for key in [k for k in self.adapters if len(k) < len(prefix)]:
            self.adapters[key] = self.adapters.pop(key)  # shorter prefixes after this one

    def get_adapter(self, url: str) -> BaseAdapter:
        """The adapter for ``url``; ``InvalidSchema`` if no prefix matches."""
        lower = url.lower()
        for prefix, adapter in self.adapters.items():
            if lower.startswith(prefix.lower()):
                return adapter
        raise exc.InvalidSchema(f"No connection adapters were found for {url!r}")

    # --- requests ---
    def request(self, method: str, url: Any, params: Any = None, data: Any = None, headers: Any = None,
                cookies: Any = None, files: Any = None, auth: Any = None, timeout: Any = None,
                allow_redirects: bool = True, proxies: Any = None, hooks: Any = None, stream: bool | None = None,
                verify: Any = None, cert: Any = None, json: Any = None) -> Response:
        prep, plain = self._prepare_call(method, url, params, data, headers, cookies, files, auth, hooks, json)
        if plain and proxies is None and cert is None:
            resp = self._send_plain(prep, timeout, allow_redirects, stream, verify)
            if resp is not None:
                return resp
        settings = self.merge_environment_settings(prep.url, proxies, stream, verify, cert)
        return self.send(prep, timeout=timeout, allow_redirects=allow_redirects, **settings)

    def merge_environment_settings(self, url: str, proxies: Any, stream: Any, verify: Any, cert: Any) -> dict[str, Any]:
        """The send settings for ``url``: the given ones over the session's, and with ``trust_env`` the
        environment's: its proxy for the URL (``*_proxy``, unless ``no_proxy`` names the host) and the CA
        bundle of REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE for ``verify=True``. Read at every call, as requests
        does: the environment may have changed."""
        if self.trust_env:
            env = environ_proxies(url, proxies.get("no_proxy") if proxies else None)
            if env:
                proxies = dict(proxies) if proxies else {}
                for k, v in env.items():
                    proxies.setdefault(k, v)
        if proxies is not None and self.proxies:
            proxies = merge_setting(proxies, self.proxies)
        elif not proxies:
            proxies = self.proxies
        verify = self.verify if verify is None else verify
        if verify is True and self.trust_env:
            verify = env_ca_bundle() or True
        return {"proxies": proxies, "stream": self.stream if stream is None else stream, "verify": verify,
                "cert": self.cert if cert is None else cert}

    def send(self, request: PreparedRequest, *, stream: bool | None = None, timeout: Any = None,
             verify: Any = None, cert: Any = None, proxies: Any = None, allow_redirects: bool = True,
             **kwargs: Any) -> Response:
        """Send a ``PreparedRequest`` through the adapter mounted for its URL, run its response hooks, store
        the cookies set, and follow redirects (unless ``allow_redirects=False``). Settings not given are
        the session's; ``timeout`` also takes (connect, read, total)."""
        if request.__class__ is not PreparedRequest and isinstance(request, Request):
            raise ValueError("You can only send PreparedRequests.")
        if timeout is None:
            timeout = self.timeout
        if self.total_timeout is not None:
            timeout = _with_total(timeout, self.total_timeout)
        if proxies is None:  # sent without request(): the environment's proxies still apply
            proxies = resolve_proxies(request.url, self.proxies, self.trust_env)
        kw = {"stream": self.stream if stream is None else stream, "timeout": timeout,
              "verify": self.verify if verify is None else verify, "cert": self.cert if cert is None else cert,
              "proxies": proxies}
        rec = self._recorder
        token = current_recorder.set(rec) if rec is not None else None
        try:
            resp = self._follow(self._send_hop(request, kw), request, kw, allow_redirects)
        finally:
            if token is not None:
                current_recorder.reset(token)
        return resp

    def _send_plain(self, prep: PreparedRequest, timeout: Any, allow_redirects: bool, stream: Any,
                    verify: Any) -> Response | None:
        """``send()`` of a request from ``prepare_plain`` (no hooks), with the settings
        ``merge_environment_settings`` would give, when they need no merging: no proxies (the session's
        or the environment's), no client certificate, total timeout or metrics, the session's own adapter
        for both schemes, and none of ``send``, ``_send_hop``, ``merge_environment_settings`` and
        ``get_adapter`` replaced. None, with nothing sent, otherwise. Measured reason for a second way
        in: the steps it skips are a quarter of a small request's Python time."""
        adapter = self._adapter
        mounted = self.adapters
        if (self._recorder is not None or self.total_timeout is not None or self.proxies
                or self.cert is not None or len(mounted) != 2 or mounted.get("http://") is not adapter
                or mounted.get("https://") is not adapter or not self._own_steps()
                or (self.trust_env and environ_proxies(prep.url))):
            return None
        if verify is None:
            verify = self.verify
        if verify is True and self.trust_env:
            verify = env_ca_bundle() or True
        kw = {"stream": self.stream if stream is None else stream,
              "timeout": self.timeout if timeout is None else timeout, "verify": verify, "cert": None,
              "proxies": self.proxies}
        resp = adapter.send(prep, **kw)
        self._store_cookies(resp, prep)
        return self._follow(resp, prep, kw, allow_redirects)

    def _own_steps(self) -> bool:
        """Whether send, _send_hop, merge_environment_settings and get_adapter are this module's (not
        overridden by a subclass, nor patched on the class or the object)."""
        return (getattr(self.send, "__func__", None) is _SEND
                and getattr(self._send_hop, "__func__", None) is _SEND_HOP
                and getattr(self.merge_environment_settings, "__func__", None) is _MERGE
                and getattr(self.get_adapter, "__func__", None) is _GET_ADAPTER)

    def _follow(self, resp: Response, request: PreparedRequest, kw: dict[str, Any],
                allow_redirects: bool) -> Response:
        """``resp``, or with ``allow_redirects`` the last answer of the redirects it starts; without,
        a redirect keeps the request it leads to (``resp.next``)."""
        # a subclass's get_redirect_target may follow answers that are not 3xx: ask it about every one
        if (resp.status_code in REDIRECT_STATI and resp.is_redirect) or self._custom_target:
            if allow_redirects:
                for resp in self.resolve_redirects(resp, request, **kw):
                    pass
            elif resp.is_redirect:
                resp._next = self.redirect_request(resp, request, self.redirect_cookies(request._own_cookies))
        return resp

    def _send_hop(self, request: PreparedRequest, kw: dict[str, Any]) -> Response:
        """One request through its adapter, its hooks, and the cookies it set into the session's jar."""
        resp = self.get_adapter(request.url).send(request, **kw)
        hooks = request.hooks
        if hooks and hooks.get("response"):
            resp = dispatch_hook("response", hooks, resp, **kw)
        self._store_cookies(resp, request)
        return resp

    def _store_cookies(self, resp: Response, request: PreparedRequest) -> None:
        """The cookies ``resp`` (and the answers in its history) set, into the session's jar."""
        if self._keep_cookies:
            if resp.history:  # responses an auth hook answered (digest's 401)
                for r in resp.history:
                    if r._native is not None and r._native.has_set_cookie:
                        extract_cookies_to_jar(self.cookies, r.request or request, r)
            native = resp._native
            if native is not None and native.has_set_cookie:
                extract_cookies_to_jar(self.cookies, resp.request or request, resp)

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


# the steps _send_plain stands in for, as this module defines them (a patch on the class replaces them there)
_SEND = Session.__dict__["send"]
_SEND_HOP = Session.__dict__["_send_hop"]
_MERGE = Session.__dict__["merge_environment_settings"]
_GET_ADAPTER = Session.__dict__["get_adapter"]


def _with_total(timeout: Any, total: float) -> Any:
    """``timeout`` as (connect, read, total) with the session's total, unless it gives its own total."""
    if isinstance(timeout, tuple) and len(timeout) == 3:
        return timeout
    return split_timeout(timeout, total)


def session(**kwargs: Any) -> Session:
    """Return a new ``Session``."""
    return Session(**kwargs)
