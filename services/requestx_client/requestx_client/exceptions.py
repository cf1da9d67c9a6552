"""Exceptions with the names and hierarchy of ``requests.exceptions``."""

from __future__ import annotations

import json as _json
from typing import Any


class RequestException(IOError):
    """Base of every error raised while handling a request."""

    def __init__(self, *args: Any, request: Any = None, response: Any = None) -> None:
        self.response = response
        self.request = request
        if response is not None and request is None and hasattr(response, "request"):
            self.request = response.request
        super().__init__(*args)


class InvalidJSONError(RequestException):
    """A JSON error occurred."""


class JSONDecodeError(InvalidJSONError, _json.JSONDecodeError):
    """The response body is not valid JSON (a ``ValueError`` as with requests). Built from json's
    ``(msg, doc, pos)``, it has the same ``msg``, ``doc``, ``pos``, ``lineno`` and ``colno``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _json.JSONDecodeError.__init__(self, *args)
        # RequestException's part gets json's formatted message ("msg: line 1 column 2 (char 1)")
        InvalidJSONError.__init__(self, *self.args, **kwargs)

    def __reduce__(self) -> Any:
        return _json.JSONDecodeError.__reduce__(self)


class HTTPError(RequestException):
    """An HTTP error status (raised by ``Response.raise_for_status``)."""


class ConnectionError(RequestException):  # noqa: A001 - same name as requests
    """A connection error occurred (refused, reset, DNS failure...)."""


class ProxyError(ConnectionError):
    """A proxy error occurred."""


class SSLError(ConnectionError):
    """A TLS error occurred (invalid certificate, handshake failure)."""


class Timeout(RequestException):
    """The request timed out. Catching this catches both connect and read timeouts."""


class ConnectTimeout(ConnectionError, Timeout):
    """The request timed out while trying to connect; it is safe to retry."""


class ReadTimeout(Timeout):
    """The server did not send any data in the allotted amount of time."""


class URLRequired(RequestException):
    """A valid URL is required to make a request."""


class TooManyRedirects(RequestException):
    """Too many redirects."""


class MissingSchema(RequestException, ValueError):
    """The URL scheme (e.g. http or https) is missing."""


class InvalidSchema(RequestException, ValueError):
    """The URL scheme is not supported (only http and https are)."""


class InvalidURL(RequestException, ValueError):
    """The URL provided was somehow invalid."""


class InvalidHeader(RequestException, ValueError):
    """The header value provided was somehow invalid."""


class InvalidProxyURL(InvalidURL):
    """The proxy URL provided is invalid."""


class ChunkedEncodingError(RequestException):
    """The server declared a body and broke off before sending it all."""


class ContentDecodingError(RequestException):
    """Failed to decode the (gzip/brotli/zstd) response content."""


class StreamConsumedError(RequestException, TypeError):
    """The content of this response was already consumed."""


class RetryError(RequestException):
    """Custom retries logic failed."""


class UnrewindableBodyError(RequestException):
    """The request body cannot be rewound for a redirect."""


# --- warnings ---

class RequestsWarning(Warning):
    """Base of the warnings this package issues."""


class FileModeWarning(RequestsWarning, DeprecationWarning):
    """A file was opened in text mode, but its length is counted in bytes."""


class RequestsDependencyWarning(RequestsWarning):
    """An imported dependency does not match the expected version range."""


__all__ = [
    "RequestException", "InvalidJSONError", "JSONDecodeError", "HTTPError", "ConnectionError",
    "ProxyError", "SSLError", "Timeout", "ConnectTimeout", "ReadTimeout", "URLRequired",
    "TooManyRedirects", "MissingSchema", "InvalidSchema", "InvalidURL", "InvalidHeader", "InvalidProxyURL",
    "ChunkedEncodingError", "ContentDecodingError", "StreamConsumedError", "RetryError",
    "UnrewindableBodyError", "RequestsWarning", "FileModeWarning", "RequestsDependencyWarning",
]
