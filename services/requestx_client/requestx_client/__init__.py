"""requestx_client: a requests-compatible HTTP client whose network core is Rust (reqwest/hyper,
rustls, one shared tokio runtime). ``import requestx_client as requests`` works for the common cases."""

from __future__ import annotations

from ._native import __version__  # noqa: E402  (the crate's version, set once in Cargo.toml)

import warnings  # noqa: E402

from . import exceptions, utils  # noqa: E402
from .adapters import HTTPAdapter  # noqa: E402
from .api import delete, enable_metrics, get, head, options, patch, post, put, request  # noqa: E402
from .async_client import AsyncClient  # noqa: E402
from .auth import AuthBase, HTTPBasicAuth, HTTPBearerAuth, HTTPDigestAuth, HTTPProxyAuth  # noqa: E402
from .cookies import RequestsCookieJar  # noqa: E402
from .exceptions import (  # noqa: E402
    ChunkedEncodingError, ConnectionError, ConnectTimeout, ContentDecodingError, FileModeWarning, HTTPError,
    InvalidHeader, InvalidJSONError, InvalidProxyURL, InvalidSchema, InvalidURL, JSONDecodeError, MissingSchema,
    ProxyError, ReadTimeout, RequestException, RequestsDependencyWarning, RequestsWarning, RetryError, SSLError,
    StreamConsumedError, Timeout, TooManyRedirects, UnrewindableBodyError, URLRequired,
)
from .models import PreparedRequest, Request, Response  # noqa: E402
from .sessions import Session, session  # noqa: E402
from .status_codes import codes  # noqa: E402
from .structures import CaseInsensitiveDict  # noqa: E402

# shown once per place, as requests does
warnings.simplefilter("default", FileModeWarning, append=True)

__all__ = [
    "AsyncClient", "AuthBase", "CaseInsensitiveDict", "ChunkedEncodingError", "ConnectTimeout", "ConnectionError",
    "ContentDecodingError", "FileModeWarning", "HTTPAdapter", "HTTPBasicAuth", "HTTPBearerAuth", "HTTPDigestAuth",
    "HTTPError", "HTTPProxyAuth", "InvalidHeader", "InvalidJSONError", "InvalidProxyURL", "InvalidSchema",
    "InvalidURL", "JSONDecodeError", "MissingSchema", "PreparedRequest", "ProxyError", "ReadTimeout", "Request",
    "RequestException", "RequestsCookieJar", "RequestsDependencyWarning", "RequestsWarning", "Response",
    "RetryError", "SSLError", "Session", "StreamConsumedError", "Timeout", "TooManyRedirects",
    "URLRequired", "UnrewindableBodyError", "codes", "delete", "enable_metrics", "exceptions", "get", "head",
    "options", "patch", "post", "put", "request", "session", "utils",
]
