"""Module-level helpers: ``requestx_client.get(...)`` etc., each on a shared default session."""

from __future__ import annotations

import threading
from typing import Any

from .metrics import SERVICE, client_metrics
from .models import Response
from .sessions import Session

class _StatelessSession(Session):
    """The shared session of the module-level functions: it keeps no cookies between calls."""

    _keep_cookies = False


_default: Session | None = None
_lock = threading.Lock()


def _session() -> Session:
    """One process-wide session (its pool is reused across calls, like a requests adapter pool).
    Cookies set by responses are not kept between module-level calls, as with requests."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = _StatelessSession()
    return _default


def enable_metrics(metrics: Any, service: str = SERVICE) -> Any:
    """Record the requests of the module-level functions (``get``, ``post``, ...): ``metrics`` is a
    ``perfkit_metrics.Registry`` (recorded with the label ``service``) or a ``ClientRequests``;
    None turns the metrics off again. Returns the ``ClientRequests`` in use (or None).
    Sessions and async clients take ``metrics=`` themselves."""
    client = client_metrics(metrics, service)
    _session().metrics = client
    return client


def request(method: str, url: Any, **kwargs: Any) -> Response:
    return _session().request(method, url, **kwargs)


def get(url: Any, params: Any = None, **kwargs: Any) -> Response:
    return request("GET", url, params=params, **kwargs)


def options(url: Any, **kwargs: Any) -> Response:
    return request("OPTIONS", url, **kwargs)


def head(url: Any, **kwargs: Any) -> Response:
    kwargs.setdefault("allow_redirects", False)
    return request("HEAD", url, **kwargs)


def post(url: Any, data: Any = None, json: Any = None, **kwargs: Any) -> Response:
    return request("POST", url, data=data, json=json, **kwargs)


def put(url: Any, data: Any = None, **kwargs: Any) -> Response:
    return request("PUT", url, data=data, **kwargs)


def patch(url: Any, data: Any = None, **kwargs: Any) -> Response:
    return request("PATCH", url, data=data, **kwargs)


def delete(url: Any, **kwargs: Any) -> Response:
    return request("DELETE", url, **kwargs)
