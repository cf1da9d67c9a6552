"""requestx_client: a requests-compatible HTTP client whose network core is Rust (reqwest/hyper,
rustls, one shared tokio runtime). ``import requestx_client as requests`` works for the common cases."""

from __future__ import annotations

__version__ = "0.1.0"

from . import exceptions  # noqa: E402
from .api import delete, enable_metrics, get, head, options, patch, post, put, request  # noqa: E402
from .async_client import AsyncClient  # noqa: E402
from .auth import AuthBase, HTTPBasicAuth, HTTPBearerAuth  # noqa: E402
from .cookies import RequestsCookieJar  # noqa: E402
from .exceptions import (  # noqa: E402
    ChunkedEncodingError, ConnectionError, ConnectTimeout, ContentDecodingError, HTTPError, InvalidHeader,
    InvalidJSONError, InvalidSchema, InvalidURL, JSONDecodeError, MissingSchema, ProxyError, ReadTimeout,
    RequestException, SSLError, StreamConsumedError, Timeout, TooManyRedirects, URLRequired,
)
from .models import PreparedRequest, Response  # noqa: E402
from .sessions import Session, session  # noqa: E402
from .structures import CaseInsensitiveDict  # noqa: E402

__all__ = [
    "AsyncClient", "AuthBase", "CaseInsensitiveDict", "ChunkedEncodingError", "ConnectTimeout", "ConnectionError",
    "ContentDecodingError", "HTTPBasicAuth", "HTTPBearerAuth", "HTTPError", "InvalidHeader", "InvalidJSONError",
    "InvalidSchema", "InvalidURL", "JSONDecodeError", "MissingSchema", "PreparedRequest", "ProxyError",
    "ReadTimeout", "RequestException", "RequestsCookieJar", "Response", "SSLError", "Session",
    "StreamConsumedError", "Timeout", "TooManyRedirects", "URLRequired", "delete", "enable_metrics", "exceptions",
    "get", "head", "options", "patch", "post", "put", "request", "session",
]
