"""HTTP errors raised by handlers and by the framework; rendered as ``application/problem+json``."""
from __future__ import annotations

from http import HTTPStatus

__all__ = ["HTTPException", "BadRequest", "NotFound", "PayloadTooLarge", "RequestTimeout", "ServiceUnavailable",
           "ValidationFailed"]


class HTTPException(Exception):
    def __init__(self, status: int, detail: str | None = None, *, title: str | None = None,
                 headers: list | None = None, errors: list | None = None):
        self.status = status
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        self.title = title or phrase
        self.detail = detail
        self.headers = headers
        self.errors = errors
        super().__init__(f"{status} {self.title}: {detail}" if detail else f"{status} {self.title}")


class BadRequest(HTTPException):
    def __init__(self, detail: str | None = None, **kw):
        super().__init__(400, detail, **kw)


class ValidationFailed(BadRequest):
    def __init__(self, detail: str, errors: list | None = None):
        super().__init__(detail, title="Validation failed", errors=errors)


class NotFound(HTTPException):
    def __init__(self, detail: str | None = None, **kw):
        super().__init__(404, detail, **kw)


class PayloadTooLarge(HTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body exceeds {limit} bytes")


class RequestTimeout(HTTPException):
    """408: the client did not send the request body within the app's body timeout."""

    def __init__(self, seconds: float):
        super().__init__(408, f"the request body was not received within {seconds:g} s")


class ServiceUnavailable(HTTPException):
    """503 with ``Retry-After``: a shared resource (e.g. the database pool) stayed busy too long."""

    def __init__(self, detail: str | None = None, retry_after: int = 1):
        super().__init__(503, detail, headers=[("retry-after", str(retry_after))])
