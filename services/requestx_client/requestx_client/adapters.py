"""Transport adapters, as ``requests.adapters``. A ``Session`` sends each request through the adapter
mounted for the longest prefix of its URL; ``HTTPAdapter`` sends through the native core (its own
connection pools), so a session mounts one for ``http://`` and ``https://``."""

from __future__ import annotations

import os
from contextvars import ContextVar
from time import perf_counter
from typing import Any

from . import _native
from . import exceptions as exc
from .metrics import Recorder, sent
from .models import PreparedRequest, Response
from .structures import CaseInsensitiveDict

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


def proxy_list(proxies: Any) -> list[tuple[str, str]] | None:
    """The native core's form of a proxies dict: sorted (scheme, url) pairs for http/https/all."""
    return sorted((k, u) for k, u in proxies.items() if k in _PROXY_KEYS and u) or None


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in body)


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
    host; ``max_retries`` (an int, or an object with ``total``) is how many times an idempotent request
    is sent again after a connection error. ``pool_connections`` and ``pool_block`` are kept for
    compatibility: the pools are per host and never block. The keyword-only settings are those of
    ``Session`` (``trust_env``: read proxy variables from the environment)."""

    __attrs__ = ["max_retries", "config", "_pool_connections", "_pool_maxsize", "_pool_block"]

    def __init__(self, pool_connections: int = DEFAULT_POOLSIZE, pool_maxsize: int = DEFAULT_POOLSIZE,
                 max_retries: Any = DEFAULT_RETRIES, pool_block: bool = DEFAULT_POOLBLOCK, *, trust_env: bool = True,
                 pool_idle_timeout: float | None = 90.0, max_body_size: int | None = None,
                 max_decoded_size: int | None = None) -> None:
        self.max_retries = max_retries
        self.config: dict[str, Any] = {}
        self._pool_connections = pool_connections
        self._pool_maxsize = pool_maxsize
        self._pool_block = pool_block
        self._pool_args = (trust_env, pool_maxsize, pool_idle_timeout, max_body_size, max_decoded_size)
        self._client = _native.Client(*self._pool_args)

    def __repr__(self) -> str:
        return f"<HTTPAdapter pool_maxsize={self._pool_maxsize} max_retries={self.max_retries!r}>"

    def close(self) -> None:
        """Close the idle connections; the adapter stays usable and opens new ones on demand."""
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
        be (connect, read, total)."""
        cert = cert_paths(cert) if cert is not None else None
        if cert is not None and request.url[:6].lower() != "https:":
            cert = None  # plain http has no handshake to present it in (requests ignores it too)
        connect, read, total = split_timeout(timeout) if timeout is not None else (None, None, None)
        if verify is not True and verify is not False and isinstance(verify, os.PathLike):
            verify = os.fspath(verify)
        plist = proxy_list(proxies) if proxies else None
        h = request.headers
        headers = list(h._store.values()) if h.__class__ is CaseInsensitiveDict else list((h or {}).items())
        body = request.body
        if body is not None and body.__class__ is not bytes:
            body = _body_bytes(body)
        method, url = request.method, request.url
        retries = _retry_count(self.max_retries) if self.max_retries else 0
        rec = current_recorder.get()
        while True:
            t0 = perf_counter()
            try:
                native = self._client.request(method, url, headers, body, connect, read, total, verify, plist,
                                              stream, rec is not None, cert)
                break
            except exc.RequestException as e:
                e.request = request
                if rec is not None and sent(e):
                    rec.failed(method, url, perf_counter() - t0, e)
                if retries and method in _IDEMPOTENT and isinstance(e, exc.ConnectionError) \
                        and not isinstance(e, (exc.SSLError, exc.ProxyError)):
                    retries -= 1
                    continue
                raise
        elapsed = perf_counter() - t0
        if rec is not None:
            rec.record(method, url, native.status, elapsed, native.timings)
        resp = Response(native, request, elapsed)
        resp.connection = self
        return resp


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
