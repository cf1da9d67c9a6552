"""What ``Session`` and ``AsyncClient`` share: their settings, ``prepare_request`` (a ``Request`` plus
the client's headers, params, auth, cookies and hooks), native send options, and (from ``RedirectRules``)
the request a redirect leads to."""

from __future__ import annotations

import os
from collections.abc import Mapping
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import urlencode

from ._body import _pairs
from ._redirects import RedirectRules
from ._request import PLAIN_URL, PreparedRequest, Request, merge_hooks, merge_setting
from .adapters import cert_paths, proxy_list, split_timeout
from .cookies import RequestsCookieJar, cookiejar_from_dict, merge_cookies
from .metrics import Recorder, client_metrics
from .utils import default_headers, default_user_agent, env_ca_bundle, get_netrc_auth

__all__ = ["DEFAULT_REDIRECT_LIMIT", "ClientBase", "default_headers", "default_user_agent", "split_timeout"]

DEFAULT_REDIRECT_LIMIT = 30


def _merge_params(request_params: Any, session_params: Any) -> Any:
    """Session params, then the request's: two mappings are merged (request wins, None removes a key);
    otherwise (strings, lists of pairs) both are kept, joined in the query."""
    if not session_params:
        return request_params
    if not request_params:
        return session_params
    if isinstance(session_params, Mapping) and isinstance(request_params, Mapping):
        return merge_setting(request_params, session_params)
    return "&".join(p if isinstance(p, str) else p.decode("ascii") if isinstance(p, bytes)
                    else urlencode(_pairs(p)) for p in (session_params, request_params))


class ClientBase(RedirectRules):
    """Settings and request preparation common to ``Session`` and ``AsyncClient``."""

    def __init__(self, *, headers: Mapping[str, str] | None = None, cookies: Any = None, auth: Any = None,
                 params: Any = None, timeout: Any = None, total_timeout: float | None = None,
                 verify: bool | str = True, proxies: Mapping[str, str] | None = None, trust_env: bool = True,
                 max_redirects: int = DEFAULT_REDIRECT_LIMIT, pool_maxsize: int = 32,
                 pool_idle_timeout: float | None = 90.0, max_body_size: int | None = None,
                 max_decoded_size: int | None = None, metrics: Any = None, http2: bool = False) -> None:
        self.headers = default_headers()
        if headers:
            self.headers.update(headers)
        self.cookies = RequestsCookieJar()
        if cookies:
            self.cookies.update(cookies)
        self.auth = auth
        self.params: Any = dict(params) if isinstance(params, Mapping) else (params or {})
        self.timeout = timeout
        self.total_timeout = total_timeout
        self.verify = verify
        self.proxies: dict[str, str] = dict(proxies or {})
        self.trust_env = trust_env
        self.max_redirects = max_redirects
        self.hooks: dict[str, list[Any]] = {"response": []}
        self.stream = False
        self.cert = None
        # limits of plain-http responses (bytes as sent, and after decoding): None = none, as requests
        self._pool_args = (trust_env, pool_maxsize, pool_idle_timeout, max_body_size, max_decoded_size, http2)
        self._recorder: Recorder | None = None
        if metrics is not None:
            self.metrics = metrics

    @property
    def metrics(self) -> Any:
        """The ``perfkit_metrics.ClientRequests`` this client records into, or None (the default).
        Set it to a ``perfkit_metrics.Registry`` (service ``requestx_client``), a ``ClientRequests``
        or None."""
        rec = self._recorder
        return None if rec is None else rec.client

    @metrics.setter
    def metrics(self, value: Any) -> None:
        client = client_metrics(value)
        self._recorder = None if client is None else Recorder(client)

    def _new_native(self) -> Any:
        """A native client (its own connection pools) with this client's pool settings."""
        from . import _native as native_mod

        return native_mod.Client(*self._pool_args)

    # --- preparation ---
    def _prepare_call(self, method: Any, url: Any, params: Any, data: Any, headers: Any, cookies: Any,
                      files: Any, auth: Any, hooks: Any, json: Any) -> tuple[PreparedRequest, bool]:
        """The request of a ``request()`` call, prepared with this client's settings, and whether it
        came from ``prepare_plain`` (then nothing but method, URL and body was given)."""
        if params is None and headers is None and cookies is None and files is None and auth is None \
                and hooks is None:
            prep = self.prepare_plain(method, url, data, json)
            if prep is not None:
                return prep, True
        request = Request(method, url, headers, files, data, params, auth, cookies, hooks, json)
        return self.prepare_request(request), False

    def prepare_plain(self, method: Any, url: Any, data: Any, json: Any) -> PreparedRequest | None:
        """``prepare_request(Request(method, url, data=data, json=json))`` in the common case, in a few
        steps: a plain http(s) URL (see ``PLAIN_URL``), and a client adding nothing but its headers (no
        auth, netrc entry, params, cookies or hooks). None when the case is not that one: the caller then
        prepares the general way. The result is the same PreparedRequest; this only skips the merging
        that has nothing to merge (about half of a small request's time in Python). Not when
        ``prepare_request`` was replaced (by a subclass, or patched on the class or the object)."""
        if (getattr(self.prepare_request, "__func__", None) is not _PREPARE_REQUEST
                or method.__class__ is not str or url.__class__ is not str
                or self.auth is not None or self.params or self.hooks.get("response")
                or self.cookies.__class__ is not RequestsCookieJar or self.cookies
                or PLAIN_URL.fullmatch(url) is None):
            return None
        if self.trust_env and self._netrc_auth(url) is not None:
            return None
        p = PreparedRequest()
        p.method = method.upper()
        p.url = url
        p.prepare_headers(self.headers)
        p._cookies = self.cookies  # empty: no Cookie header, but the jar a redirect's cookies go through
        p.prepare_body(data, None, json)
        return p

    def prepare_request(self, request: Request) -> PreparedRequest:
        """``request`` prepared with this client's settings merged in: headers (a None value removes a
        header), params, auth (else ``.netrc`` when ``trust_env``), cookies (the client's jar plus the
        request's) and hooks (the request's replace the client's for the same event)."""
        own = request.cookies or None
        if own is not None and not isinstance(own, CookieJar):
            own = cookiejar_from_dict(own)
        jar = merge_cookies(self.cookies.copy(), own) if own is not None else self.cookies
        url = request.url
        auth = request.auth
        if not auth and self.auth is None and self.trust_env and url.__class__ is str:
            auth = self._netrc_auth(url)  # over credentials in the URL, as in requests
        rh = request.headers
        if rh:
            headers = self.headers.copy()
            for k, v in rh.items():
                if v is None:
                    headers.pop(k, None)
                else:
                    headers[k] = v
        else:
            headers = self.headers
        if auth is None:
            auth = self.auth
        params = request.params
        if self.params:
            params = _merge_params(params, self.params)
        hooks = request.hooks
        if self.hooks.get("response"):
            hooks = merge_hooks(hooks, self.hooks)
        p = PreparedRequest()
        # positional, in prepare()'s order (method, url, headers, files, data, params, auth, cookies, hooks, json)
        p.prepare(request.method, url, headers, request.files, request.data, params, auth, jar, hooks, request.json)
        p._own_cookies = own
        return p

    def _netrc_auth(self, url: str) -> tuple[str, str] | None:
        return get_netrc_auth(url)

    def prepare(self, method: str, url: Any, params: Any = None, data: Any = None,
                headers: Mapping[str, Any] | None = None, cookies: Any = None, files: Any = None,
                auth: Any = None, json: Any = None) -> PreparedRequest:
        """``prepare_request(Request(method, url, ...))`` in one call."""
        return self.prepare_request(Request(method, url, headers, files, data, params, auth, cookies, None, json))

    def native_options(self, timeout: Any, verify: Any, proxies: Any, cert: Any = None) -> tuple[Any, ...]:
        """(connect, read, total, verify, proxies, cert) arguments of the native call, with this client's
        settings where the request gives none (cert: checked paths, or None)."""
        c = self.cert if cert is None else cert
        c = cert_paths(c) if c is not None else None
        connect, read, total = split_timeout(timeout if timeout is not None else self.timeout, self.total_timeout)
        v = self.verify if verify is None else verify
        if v is True and self.trust_env:
            v = env_ca_bundle() or True
        elif isinstance(v, os.PathLike):
            v = os.fspath(v)
        plist = None
        if self.proxies or proxies:
            plist = proxy_list({**self.proxies, **(proxies or {})})
        return connect, read, total, v, plist, c


# prepare_request as defined here: prepare_plain stands in only for this one
_PREPARE_REQUEST = ClientBase.__dict__["prepare_request"]
