"""Transport adapters, as ``requests.adapters``. A ``Session`` sends each request through the adapter
mounted for the longest prefix of its URL; ``HTTPAdapter`` sends through the native core (its own
connection pools), so a session mounts one for ``http://`` and ``https://``."""

from __future__ import annotations

import os
import time
from contextvars import ContextVar
from time import monotonic, perf_counter
from typing import Any
from urllib.parse import urlsplit

from . import _native
from . import exceptions as exc
from ._body import body_to_send
from ._proxies import checked_proxy_url, select_proxy
from ._request import url_to_send
from .auth import _basic_auth_str
from .metrics import Recorder, sent
from .models import PreparedRequest, Response
from .structures import CaseInsensitiveDict
from .utils import get_auth_from_url

__all__ = ["BaseAdapter", "HTTPAdapter", "DEFAULT_POOLSIZE", "DEFAULT_RETRIES", "DEFAULT_POOLBLOCK"]

DEFAULT_POOLSIZE = 10
DEFAULT_RETRIES = 0
DEFAULT_POOLBLOCK = False

# The metrics recorder of the session whose send() is running, or None. A context variable rather than
# an argument, so that whatever sends for that session records into it: the adapter it mounted, a
# subclass whose send() calls this one, or a hook sending again (digest auth); each thread and task
# sees its own value.
current_recorder: ContextVar[Recorder | None] = ContextVar("requestx_client_recorder", default=None)

_PROXY_KEYS = ("http", "https", "all")
# methods sent again after a connection error when max_retries allows (a POST may have had effects)
_IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"))


def split_timeout(timeout: Any, total: float | None = None) -> tuple[float | None, float | None, float | None]:
    """(connect, read, total) from ``timeout=``: a number, (connect, read), (connect, read, total), or a
    urllib3 ``Timeout`` (read through its public ``connect_timeout``/``read_timeout``/``total``)."""
    if timeout is None:
        return None, None, total
    if isinstance(timeout, tuple):
        if len(timeout) == 2:
            return _seconds(timeout[0]), _seconds(timeout[1]), total
        if len(timeout) == 3:
            return _seconds(timeout[0]), _seconds(timeout[1]), _seconds(timeout[2]) if total is None else total
        raise ValueError(f"Invalid timeout {timeout}. Pass a (connect, read) timeout tuple, or a single float to "
                         "set both timeouts to the same value.")
    if hasattr(timeout, "read_timeout") and hasattr(timeout, "connect_timeout"):
        own_total = _seconds(getattr(timeout, "total", None), strict=False)
        return (_seconds(timeout.connect_timeout, strict=False), _seconds(timeout.read_timeout, strict=False),
                own_total if total is None else total)
    value = _seconds(timeout)
    return value, value, total


def _seconds(value: Any, strict: bool = True) -> float | None:
    """A timeout in seconds: a number or None (``strict=False``: anything else, such as urllib3's
    "default" marker, counts as None)."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    if not strict:
        return None
    raise ValueError(f"Timeout value was {value!r}, but it must be an int, float or None.")


def proxy_list(proxies: Any) -> list[tuple[str, str]] | None:
    """The native core's form of a proxies dict: sorted (scheme, url) pairs for http/https/all."""
    return sorted((k, u) for k, u in proxies.items() if k in _PROXY_KEYS and u) or None


def _retry_count(max_retries: Any) -> int:
    if isinstance(max_retries, int):
        return max(max_retries, 0)
    total = getattr(max_retries, "total", 0)  # a urllib3 Retry-like object
    return total if isinstance(total, int) and not isinstance(total, bool) else 0


class BaseAdapter:
    """What a Session needs of an adapter: ``send`` and ``close``."""

    def send(self, request: PreparedRequest, stream: bool = False, timeout: Any = None, verify: Any = True,
             cert: Any = None, proxies: Any = None) -> Response:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class HTTPAdapter(BaseAdapter):
    """http and https through the native core. ``pool_maxsize`` is the number of idle connections kept per
    host; ``max_retries`` (an int, or a urllib3 ``Retry``: its ``total`` counts connection errors, and its
    ``status_forcelist`` answers sent again, then ``RetryError``) is how many times an idempotent request
    is sent again. ``pool_connections`` and ``pool_block`` are kept for compatibility: the pools are per
    host and never block. The keyword-only settings are those of ``Session`` (``http2``: offer HTTP/2 to
    https servers). Proxies come from ``send(proxies=...)``: the session adds the environment's."""

    __attrs__ = ["max_retries", "config", "_pool_connections", "_pool_maxsize", "_pool_block"]

    def __init__(self, pool_connections: int = DEFAULT_POOLSIZE, pool_maxsize: int = DEFAULT_POOLSIZE,
                 max_retries: Any = DEFAULT_RETRIES, pool_block: bool = DEFAULT_POOLBLOCK, *,
                 pool_idle_timeout: float | None = 90.0, max_body_size: int | None = None,
                 max_decoded_size: int | None = None, http2: bool = False) -> None:
        self.max_retries = max_retries
        self.config: dict[str, Any] = {}
        self._pool_connections = pool_connections
        self._pool_maxsize = pool_maxsize
        self._pool_block = pool_block
        # the environment's proxies are chosen per request in Python (_proxies.py), as requests does, so
        # the core reads none itself: a variable changed after the session was made still applies
        self._pool_args = (False, pool_maxsize, pool_idle_timeout, max_body_size, max_decoded_size, http2)
        self._client = _native.Client(*self._pool_args)
        # requests' adapters keep a urllib3 ProxyManager per proxy here; the core keeps its proxied pools
        # itself, so this stays empty unless a caller stores its own (close() clears what is there)
        self.proxy_manager: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<HTTPAdapter pool_maxsize={self._pool_maxsize} max_retries={self.max_retries!r}>"

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__attrs__} | {"_pool_args": self._pool_args}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.proxy_manager = {}
        self._client = _native.Client(*self._pool_args)

    @property
    def poolmanager(self) -> "PoolView":
        """The connection pools in use (one per TLS/proxy setting), as ``requests``' ``poolmanager`` shows."""
        return PoolView(self)

    def proxy_headers(self, proxy: str) -> dict[str, str]:
        """The headers a request through ``proxy`` carries to it: Proxy-Authorization from its URL's
        credentials (the core adds it by itself; this is for callers and subclasses that ask)."""
        user, password = get_auth_from_url(proxy)
        return {"Proxy-Authorization": _basic_auth_str(user, password)} if user else {}

    def close(self) -> None:
        """Close the idle connections; the adapter stays usable and opens new ones on demand."""
        for manager in self.proxy_manager.values():
            manager.clear()
        self.proxy_manager.clear()
        self._client = _native.Client(*self._pool_args)

    def _sharing_pools(self) -> "HTTPAdapter":
        """A copy of this adapter that uses the same connection pools (for ``Session.clone``)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._client = self._client.clone_handle()
        return new

    def send(self, request: PreparedRequest, stream: bool = False, timeout: Any = None, verify: Any = True,
             cert: Any = None, proxies: Any = None) -> Response:
        """Send ``request`` once (no redirects followed) and return its ``Response``; ``timeout`` may also
        be (connect, read, total) or a urllib3 ``Timeout``."""
        cert = cert_paths(cert) if cert is not None else None
        if cert is not None and request.url[:6].lower() != "https:":
            cert = None  # plain http has no handshake to present it in (requests ignores it too)
        connect, read, total = split_timeout(timeout) if timeout is not None else (None, None, None)
        if verify is not True and verify is not False:
            verify = ca_bundle_path(verify, request.url)
        plist = None
        if proxies:
            proxy = select_proxy(request.url, proxies)
            if proxy:
                plist = [("all", checked_proxy_url(proxy))]
        h = request.headers
        headers = list(h._store.values()) if h.__class__ is CaseInsensitiveDict else list((h or {}).items())
        body = request.body
        if body is not None and body.__class__ is not bytes:
            body = body_to_send(body)
        method, url = request.method, request.url
        if "@" in url:
            url = url_to_send(url)  # its credentials went into Authorization
        retry = self.max_retries
        retries = _retry_count(retry) if retry else 0
        rec = current_recorder.get()
        while True:
            t0 = perf_counter()
            try:
                native = self._client.request(method, url, headers, body, connect, read, total, verify, plist,
                                              stream, rec is not None, cert)
            except exc.RequestException as e:
                e.request = request
                if rec is not None and sent(e):
                    rec.failed(method, url, perf_counter() - t0, e)
                # a streamed body is being read as it goes: it is not sent twice
                if retries and method in _IDEMPOTENT and isinstance(e, exc.ConnectionError) and not callable(body) \
                        and not isinstance(e, (exc.SSLError, exc.ProxyError)):
                    retries -= 1
                    continue
                if isinstance(e, exc.ReadTimeout):
                    _explain_read_timeout(e, url, read)
                raise
            elapsed = perf_counter() - t0
            if rec is not None:
                rec.record(method, url, native.status, elapsed, native.timings)
            if retry.__class__ is int or not _retry_on_status(retry, method, native):
                break
            if retries <= 0:
                if getattr(retry, "raise_on_status", True):
                    raise exc.RetryError(f"Max retries exceeded with url: {url} "
                                         f"(too many {native.status} error responses)", request=request)
                break
            retries -= 1
            native.close()
            _sleep_before_retry(retry, native)
        resp = Response(native, request, elapsed)
        resp.connection = self
        return resp


class PoolView:
    """What ``adapter.poolmanager`` offers in requests that applies here: ``pools`` (their number) and
    ``clear()``."""

    def __init__(self, adapter: HTTPAdapter) -> None:
        self._adapter = adapter

    @property
    def pools(self) -> list[int]:
        return list(range(self._adapter._client.pool_count()))

    def clear(self) -> None:
        self._adapter.close()


# CA bundle paths found to exist, by path, with when (monotonic()); looked at again after a second.
# A stat per https request costs about as much as the rest of the adapter's work.
_BUNDLES_SEEN: dict[str, float] = {}


def ca_bundle_path(verify: Any, url: str) -> Any:
    """``verify=`` as the core takes it: True/False, or the path of a CA bundle (file or folder) that must
    exist for an https URL (``OSError`` before any connection, as requests raises)."""
    if verify.__class__ is not str and isinstance(verify, os.PathLike):
        verify = os.fspath(verify)
    if isinstance(verify, str) and url[:6].lower() == "https:":
        now = monotonic()
        if now - _BUNDLES_SEEN.get(verify, -2.0) > 1.0:
            if not os.path.exists(verify):
                raise OSError(f"Could not find a suitable TLS CA certificate bundle, invalid path: {verify}")
            if len(_BUNDLES_SEEN) >= 64:
                _BUNDLES_SEEN.clear()
            _BUNDLES_SEEN[verify] = now
    return verify


def _retry_on_status(retry: Any, method: str, native: Any) -> bool:
    """Whether a urllib3 ``Retry`` (or alike) asks for this answer to be sent again (its
    ``status_forcelist`` and allowed methods, through its public ``is_retry``)."""
    is_retry = getattr(retry, "is_retry", None)
    if is_retry is None:
        return False
    return bool(is_retry(method, native.status, native.header("retry-after") is not None))


def _sleep_before_retry(retry: Any, native: Any) -> None:
    """Wait as the Retry asks: the answer's Retry-After (seconds) when it respects it, else nothing (the
    backoff of urllib3 depends on its own history, which is not kept here)."""
    after = native.header("retry-after")
    if after and getattr(retry, "respect_retry_after_header", True) and after.strip().isdigit():
        time.sleep(min(int(after.strip()), getattr(retry, "backoff_max", 120)))


def _explain_read_timeout(e: exc.ReadTimeout, url: str, read: float | None) -> None:
    """Give ``e`` requests' shape: its first argument is the cause, whose message says "Read timed out"."""
    if e.args and isinstance(e.args[0], str):
        e.args = (TimeoutError(f"{urlsplit(url).netloc}: Read timed out. (read timeout={read}); {e.args[0]}"),)


def cert_paths(cert: Any) -> Any:
    """requests' ``cert=``: a path to one PEM file (certificate and key), or a (certificate, key) pair;
    path-like objects become str for the native core, which reads the files (SSLError when it cannot)."""
    if isinstance(cert, (str, os.PathLike)):
        paths = (os.fspath(cert),)
    elif isinstance(cert, tuple) and len(cert) == 2:
        paths = (os.fspath(cert[0]), os.fspath(cert[1]))
    else:
        raise ValueError("cert must be a path to a PEM file or a (certificate, key) pair of paths")
    for path, what in zip(paths, ("certificate", "key")):
        if not os.path.exists(path):  # as requests checks, whatever the URL's scheme
            raise OSError(f"Could not find the TLS {what} file, invalid path: {path}")
    return paths[0] if len(paths) == 1 else paths
