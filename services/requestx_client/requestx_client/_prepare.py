"""Request preparation shared by ``Session`` and ``AsyncClient``: URL + params, headers, body
(data/json/files), auth, cookies, timeouts, TLS verification and proxies, redirect targets."""

from __future__ import annotations

import mimetypes
import os
import uuid
from collections.abc import Iterable, Mapping
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import unquote, urlencode, urljoin, urlsplit, urlunsplit

from . import __version__
from . import exceptions as exc
from .auth import HTTPBasicAuth
from .metrics import Recorder, client_metrics
from .cookies import RequestsCookieJar, cookiejar_from_dict, extract_cookies_to_jar, get_cookie_header, merge_cookies
from .models import PreparedRequest, Response
from .structures import CaseInsensitiveDict

try:  # orjson serialises json= bodies faster when present
    import orjson as _orjson

    def _dumps(obj: Any) -> bytes:
        try:
            return _orjson.dumps(obj)
        except TypeError as e:
            raise exc.InvalidJSONError(str(e)) from e
except ImportError:  # pragma: no cover - orjson is optional
    import json as _stdjson

    def _dumps(obj: Any) -> bytes:
        try:
            return _stdjson.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise exc.InvalidJSONError(str(e)) from e

DEFAULT_REDIRECT_LIMIT = 30
_PROXY_KEYS = ("http", "https", "all")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str | None, int | None]:
    """(scheme, host, port) with the scheme's default port filled in; ValueError for a bad port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(scheme)


def default_user_agent() -> str:
    return f"python-requestx-client/{__version__}"


def default_headers() -> CaseInsensitiveDict:
    return CaseInsensitiveDict({
        "User-Agent": default_user_agent(),
        "Accept-Encoding": "gzip, deflate, br, zstd",
        "Accept": "*/*",
        "Connection": "keep-alive",
    })


def _pairs(data: Any) -> list[tuple[Any, Any]]:
    if data is None:
        return []
    if isinstance(data, Mapping):
        items: Iterable[Any] = data.items()
    else:
        items = data
    out: list[tuple[Any, Any]] = []
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            out.extend((k, x) for x in v if x is not None)
        else:
            out.append((k, v))
    return out


def _to_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode("utf-8")


def _quote_field(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def encode_multipart(data: Any, files: Any) -> tuple[bytes, str]:
    """multipart/form-data body for ``files=`` (plus the ``data=`` fields); returns (body, content type)."""
    boundary = uuid.uuid4().hex
    sep = b"--" + boundary.encode("ascii") + b"\r\n"
    out: list[bytes] = []
    if data is not None and not isinstance(data, (str, bytes)):
        for name, value in _pairs(data):
            out.append(sep)
            out.append(f'Content-Disposition: form-data; name="{_quote_field(str(name))}"\r\n\r\n'.encode())
            out.append(_to_bytes(value))
            out.append(b"\r\n")
    for name, spec in (files.items() if isinstance(files, Mapping) else files):
        ctype = None
        extra: Mapping[str, str] = {}
        if isinstance(spec, (tuple, list)):
            if len(spec) == 2:
                fname, fobj = spec
            elif len(spec) == 3:
                fname, fobj, ctype = spec
            elif len(spec) == 4:
                fname, fobj, ctype, extra = spec
            else:
                raise ValueError("a files= entry must be a file or a (filename, file[, content_type[, headers]]) tuple")
        else:
            fobj = spec
            fname = os.path.basename(getattr(spec, "name", "") or "") or str(name)
        if fobj is None:
            continue
        if isinstance(fobj, (bytes, bytearray, memoryview, str)):
            content = _to_bytes(fobj)
        elif hasattr(fobj, "read"):
            content = _to_bytes(fobj.read())
        else:
            raise ValueError(f"cannot read the content of files[{name!r}]")
        disp = f'Content-Disposition: form-data; name="{_quote_field(str(name))}"'
        if fname is not None:
            disp += f'; filename="{_quote_field(str(fname))}"'
        out.append(sep)
        out.append(disp.encode() + b"\r\n")
        if ctype:
            out.append(f"Content-Type: {ctype}\r\n".encode())
        for hk, hv in extra.items():
            out.append(f"{hk}: {hv}\r\n".encode())
        out.append(b"\r\n")
        out.append(content)
        out.append(b"\r\n")
    out.append(b"--" + boundary.encode("ascii") + b"--\r\n")
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def guess_type(name: str) -> str | None:
    return mimetypes.guess_type(name)[0]


def encode_body(data: Any, files: Any, json: Any) -> tuple[bytes | None, str | None]:
    """(body, content type) for data=/json=/files= as requests does."""
    if files:
        return encode_multipart(data, files)
    if data is not None and not (isinstance(data, (dict, list, tuple)) and not data):
        if isinstance(data, bytes):
            return data, None
        if isinstance(data, str):
            return data.encode("utf-8"), None
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data), None
        if hasattr(data, "read"):
            return _to_bytes(data.read()), None
        if isinstance(data, (Mapping, list, tuple)):
            return urlencode([(k, v) for k, v in _pairs(data)], doseq=False).encode("ascii"), \
                "application/x-www-form-urlencoded"
        if isinstance(data, Iterable):  # generator of chunks: sent as one body
            return b"".join(_to_bytes(c) for c in data), None
        raise ValueError(f"cannot send data of type {type(data).__name__}")
    if json is not None:
        return _dumps(json), "application/json"
    return None, None


def add_params(url: str, *param_sets: Any) -> str:
    extra: list[str] = []
    for params in param_sets:
        if not params:
            continue
        if isinstance(params, (str, bytes)):
            extra.append(params.decode("ascii") if isinstance(params, bytes) else params)
        else:
            extra.append(urlencode(_pairs(params), doseq=False))
    extra = [e for e in extra if e]
    if not extra:
        return url
    parts = urlsplit(url)
    query = "&".join(([parts.query] if parts.query else []) + extra)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def split_timeout(timeout: Any, total: float | None) -> tuple[float | None, float | None, float | None]:
    """(connect, read, total) from ``timeout=`` (a number, (connect, read) or (connect, read, total))."""
    if timeout is None:
        return None, None, total
    if isinstance(timeout, tuple):
        if len(timeout) == 2:
            return timeout[0], timeout[1], total
        if len(timeout) == 3:
            return timeout[0], timeout[1], timeout[2] if total is None else total
        raise ValueError(f"timeout must be a number, a (connect, read) tuple or (connect, read, total): {timeout!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"timeout must be a number, a (connect, read) tuple or (connect, read, total): {timeout!r}")
    return timeout, timeout, total


class ClientBase:
    """Settings and request preparation common to ``Session`` and ``AsyncClient``."""

    _keep_cookies = True  # whether the cookies responses set go to ``self.cookies``

    def __init__(self, *, headers: Mapping[str, str] | None = None, cookies: Any = None, auth: Any = None,
                 params: Any = None, timeout: Any = None, total_timeout: float | None = None,
                 verify: bool | str = True, proxies: Mapping[str, str] | None = None, trust_env: bool = True,
                 max_redirects: int = DEFAULT_REDIRECT_LIMIT, pool_maxsize: int = 32,
                 pool_idle_timeout: float | None = 90.0, max_body_size: int | None = None,
                 max_decoded_size: int | None = None, metrics: Any = None, _native: Any = None) -> None:
        from . import _native as native_mod

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
        self._env_bundle = (os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")) \
            if trust_env else None
        # limits of plain-http responses (bytes as sent, and after decoding): None = none, as requests
        self._pool_args = (trust_env, pool_maxsize, pool_idle_timeout, max_body_size, max_decoded_size)
        self._native = _native if _native is not None else native_mod.Client(*self._pool_args)
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

    def _drop_pools(self) -> None:
        """Let go of this client's connection pools (idle connections close once no clone uses them)."""
        from . import _native as native_mod

        self._native = native_mod.Client(*self._pool_args)

    # --- preparation ---
    def prepare(self, method: str, url: Any, params: Any = None, data: Any = None,
                headers: Mapping[str, Any] | None = None, cookies: Any = None, files: Any = None,
                auth: Any = None, json: Any = None) -> PreparedRequest:
        if not isinstance(url, str):
            if isinstance(url, bytes):
                url = url.decode("utf-8")
            elif url is None:
                raise exc.URLRequired("a URL is required")
            else:
                url = str(url)
        url = url.strip()
        if self.params or params:
            url = add_params(url, self.params, params)
        merged = self.headers.copy()
        if headers:
            for k, v in headers.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
        method = method.upper()
        if data is None and json is None and files is None:
            body = None
            if method in ("POST", "PUT", "PATCH"):
                merged["Content-Length"] = "0"
        else:
            body, ctype = encode_body(data, files, json)
            if ctype is not None and "content-type" not in merged:
                merged["Content-Type"] = ctype
            if body is None and method in ("POST", "PUT", "PATCH"):
                merged["Content-Length"] = "0"
        prep = PreparedRequest(method, url, merged, body)
        if cookies or self.cookies:  # an explicit Cookie header wins (the jar leaves it alone)
            cookie_header = get_cookie_header(self._request_jar(cookies), prep)
            if cookie_header:
                merged["Cookie"] = cookie_header
        if auth is None:
            auth = self.auth
        if auth is None and "@" in url:
            parts = urlsplit(url)
            if parts.username is not None:
                auth = (unquote(parts.username), unquote(parts.password or ""))
                host = parts.netloc.rpartition("@")[2]
                prep.url = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
        if auth is not None:
            if isinstance(auth, (tuple, list)) and len(auth) == 2:
                auth = HTTPBasicAuth(*auth)
            if not callable(auth):
                raise TypeError("auth must be a (user, password) tuple or a callable like HTTPBasicAuth")
            prep = auth(prep) or prep
        return prep

    def _plain_options(self) -> bool:
        """Whether the session's own settings give the default native options (no timeout, verify=True,
        no proxies, no client certificate): then they are (None, None, total, bundle or True, None)."""
        return self.timeout is None and self.verify is True and not self.proxies and self.cert is None

    def native_options(self, timeout: Any, verify: Any, proxies: Any, cert: Any = None) -> tuple[Any, ...]:
        """(connect, read, total, verify, proxies) arguments of the native call."""
        if cert is not None or self.cert is not None:
            raise NotImplementedError("client certificates (cert=) are not supported")
        connect, read, total = split_timeout(timeout if timeout is not None else self.timeout, self.total_timeout)
        v = self.verify if verify is None else verify
        if v is True and self._env_bundle:
            v = self._env_bundle
        elif isinstance(v, os.PathLike):
            v = os.fspath(v)
        plist = None
        if self.proxies or proxies:
            merged = dict(self.proxies)
            if proxies:
                merged.update(proxies)
            plist = sorted((k, u) for k, u in merged.items() if k in _PROXY_KEYS and u) or None
        return connect, read, total, v, plist

    def header_list(self, prep: PreparedRequest) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in prep.headers.items()]

    def _request_jar(self, cookies: Any) -> CookieJar:
        """The client's jar, or a copy with the request's own ``cookies=`` added (both are sent, as in requests)."""
        if not cookies:
            return self.cookies
        own = cookies if isinstance(cookies, CookieJar) else cookiejar_from_dict(cookies)
        return merge_cookies(self.cookies.copy(), own)

    def redirect_cookies(self, cookies: Any) -> RequestsCookieJar:
        """The jar a redirect chain carries to ``redirect_request``: the request's ``cookies=``, plus, for a
        client that keeps no cookies, those each hop sets (they still reach the next hops, as in requests)."""
        jar = RequestsCookieJar()
        merge_cookies(jar, cookies)
        return jar

    def should_strip_auth(self, old_url: str, new_url: str) -> bool:
        """Whether a redirect from ``old_url`` to ``new_url`` must drop Authorization, as requests decides:
        kept for the same scheme, host and port (a default port counts as no port) and for http:80 ->
        https:443 of the same host; dropped for any other change of host, scheme or port."""
        try:
            old, new = _origin(old_url), _origin(new_url)
        except ValueError:  # a port that is not one: nothing to compare, so do not forward credentials
            return True
        if old[1] != new[1]:
            return True
        return old != new and (old[0], old[2], new[0], new[2]) != ("http", 80, "https", 443)

    def redirect_request(self, resp: Response, prep: PreparedRequest, cookies: Any) -> PreparedRequest:
        """The request to send for a redirect response (method, body and headers rewritten as requests does).
        ``cookies`` is the chain's jar from ``redirect_cookies`` (or the request's ``cookies=``)."""
        location = resp._native.header("location")
        if location.startswith("//"):
            location = urlsplit(resp.url).scheme + ":" + location
        new_url = urljoin(resp.url, location)
        old_parts, new_parts = urlsplit(prep.url), urlsplit(new_url)
        if new_parts.fragment == "" and old_parts.fragment:
            new_url = urlunsplit(new_parts._replace(fragment=old_parts.fragment))
        method = prep.method
        code = resp.status_code
        if (code in (302, 303) and method != "HEAD") or (code == 301 and method == "POST"):
            method = "GET"
        headers = prep.headers.copy()
        body = prep.body
        if code not in (307, 308):
            for h in ("Content-Length", "Content-Type", "Transfer-Encoding"):
                headers.pop(h, None)
            body = None
        headers.pop("Cookie", None)
        if "Authorization" in headers and self.should_strip_auth(prep.url, new_url):
            del headers["Authorization"]
        if isinstance(cookies, CookieJar) and not self._keep_cookies:
            extract_cookies_to_jar(cookies, prep, resp)
        new = PreparedRequest(method, new_url, headers, body)
        cookie_header = get_cookie_header(self._request_jar(cookies), new)
        if cookie_header:
            headers["Cookie"] = cookie_header
        return new

    def run_hooks(self, hooks: Any, resp: Response, **kwargs: Any) -> Response:
        for group in (self.hooks.get("response") or (), (hooks or {}).get("response") or ()):
            if callable(group):
                group = (group,)
            for hook in group:
                new = hook(resp, **kwargs)
                if new is not None:
                    resp = new
        return resp
