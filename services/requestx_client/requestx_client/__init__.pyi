"""Public API of requestx_client (requests-compatible)."""

from typing import Any

from . import exceptions as exceptions, utils as utils
from .adapters import HTTPAdapter as HTTPAdapter
from .async_client import AsyncClient as AsyncClient
from .auth import (
    AuthBase as AuthBase, HTTPBasicAuth as HTTPBasicAuth, HTTPBearerAuth as HTTPBearerAuth,
    HTTPDigestAuth as HTTPDigestAuth, HTTPProxyAuth as HTTPProxyAuth,
)
from .cookies import RequestsCookieJar as RequestsCookieJar
from .exceptions import (
    ChunkedEncodingError as ChunkedEncodingError, ConnectionError as ConnectionError,
    ConnectTimeout as ConnectTimeout, ContentDecodingError as ContentDecodingError, HTTPError as HTTPError,
    InvalidHeader as InvalidHeader, InvalidJSONError as InvalidJSONError, InvalidSchema as InvalidSchema,
    InvalidURL as InvalidURL, JSONDecodeError as JSONDecodeError, MissingSchema as MissingSchema,
    ProxyError as ProxyError, ReadTimeout as ReadTimeout, RequestException as RequestException,
    SSLError as SSLError, StreamConsumedError as StreamConsumedError, Timeout as Timeout,
    TooManyRedirects as TooManyRedirects, URLRequired as URLRequired, InvalidProxyURL as InvalidProxyURL,
    RetryError as RetryError, UnrewindableBodyError as UnrewindableBodyError, RequestsWarning as RequestsWarning,
    FileModeWarning as FileModeWarning, RequestsDependencyWarning as RequestsDependencyWarning,
)
from .models import PreparedRequest as PreparedRequest, Request as Request, Response as Response
from .sessions import Session as Session, session as session
from .status_codes import codes as codes
from .structures import CaseInsensitiveDict as CaseInsensitiveDict

__version__: str

def request(method: str, url: str | bytes, *, params: Any = ..., data: Any = ..., headers: Any = ...,
            cookies: Any = ..., files: Any = ..., auth: Any = ..., timeout: Any = ...,
            allow_redirects: bool = ..., proxies: dict[str, str] | None = ..., hooks: Any = ...,
            stream: bool | None = ..., verify: bool | str | None = ..., cert: None = ...,
            json: Any = ...) -> Response: ...
def get(url: str | bytes, params: Any = ..., **kwargs: Any) -> Response: ...
def options(url: str | bytes, **kwargs: Any) -> Response: ...
def head(url: str | bytes, **kwargs: Any) -> Response: ...
def post(url: str | bytes, data: Any = ..., json: Any = ..., **kwargs: Any) -> Response: ...
def put(url: str | bytes, data: Any = ..., **kwargs: Any) -> Response: ...
def patch(url: str | bytes, data: Any = ..., **kwargs: Any) -> Response: ...
def delete(url: str | bytes, **kwargs: Any) -> Response: ...
def enable_metrics(metrics: Any, service: str = ...) -> Any: ...
