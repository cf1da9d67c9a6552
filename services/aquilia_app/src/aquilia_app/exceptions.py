"""HTTP errors raised by handlers and by the framework; rendered as ``application/problem+json``."""
from __future__ import annotations

import re
from http import HTTPStatus

__all__ = ["HTTPException", "BadRequest", "NotFound", "MethodNotAllowed", "PayloadTooLarge", "RequestTimeout", "ServiceUnavailable",
           "UnsupportedMediaType", "ValidationFailed", "error_entry"]


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

    @property
    def status_code(self) -> int:
        """``status`` under Starlette's and FastAPI's name (exception handlers written for them read it)."""
        return self.status


class BadRequest(HTTPException):
    def __init__(self, detail: str | None = None, **kw):
        super().__init__(400, detail, **kw)


class ValidationFailed(HTTPException):
    """422: the request is well-formed (JSON parsed, parameters present) but a value does not fit its
    declared type or constraints.  ``errors`` lists ``{"loc": [...], "msg": ..., "type": ...}`` with
    ``loc`` starting at the location: ``query``, ``header``, ``cookie``, ``path``, ``body`` or ``form``."""

    def __init__(self, detail: str, errors: list | None = None):
        super().__init__(422, detail, title="Unprocessable Content", errors=errors)

    @classmethod
    def from_msgspec(cls, err: Exception, loc: list) -> "ValidationFailed":
        """From a ``msgspec.ValidationError``, its ``$.a[0]`` path appended to ``loc``."""
        return cls(str(err), errors=[error_entry(str(err), loc)])


class NotFound(HTTPException):
    def __init__(self, detail: str | None = None, **kw):
        super().__init__(404, detail, **kw)


class MethodNotAllowed(HTTPException):
    """405 with ``Allow``: the path exists, not for this method."""

    def __init__(self, method: str, allow):
        self.allow = tuple(allow)
        super().__init__(405, f"{method} is not allowed here", headers=[("allow", ", ".join(self.allow))])


class PayloadTooLarge(HTTPException):
    def __init__(self, limit: int, detail: str | None = None):
        super().__init__(413, detail or f"request body exceeds {limit} bytes")


class UnsupportedMediaType(HTTPException):
    """415: the body's Content-Type is not one this endpoint reads."""

    def __init__(self, detail: str | None = None):
        super().__init__(415, detail)


class RequestTimeout(HTTPException):
    """408: the client did not send the request body within the app's body timeout (``seconds``); a
    handler may raise it as any other ``HTTPException``: ``RequestTimeout()`` or ``RequestTimeout(detail=...)``."""

    def __init__(self, seconds: float | None = None, detail: str | None = None):
        if detail is None and seconds is not None:
            detail = f"the request body was not received within {seconds:g} s"
        super().__init__(408, detail)


class ServiceUnavailable(HTTPException):
    """503 with ``Retry-After``: a shared resource (e.g. the database pool) stayed busy too long."""

    def __init__(self, detail: str | None = None, retry_after: int = 1):
        super().__init__(503, detail, headers=[("retry-after", str(retry_after))])


# msgspec reports where a value failed as one message: "Expected `int`, got `str` - at `$.tags[0]`".
# It has no structured form, so the path and the kind of failure are read from that text.
_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_MISSING_FIELD = re.compile(r"^Object missing required field `([^`]+)`$")
_KINDS = (("Object missing required field", "missing"), ("Object contains unknown field", "unknown_field"),
          ("Invalid enum value", "enum"), ("Expected `", "type"))


def error_entry(message: str, loc: list) -> dict:
    """One ``errors`` entry from a msgspec validation message: ``{"loc", "msg", "type"}``."""
    m = _AT.match(message)
    msg, path = m.group("msg"), m.group("path") or ""
    loc = list(loc)
    for name, index in _STEP.findall(path):
        loc.append(name if name else (int(index) if index.isdigit() else index))
    missing = _MISSING_FIELD.match(msg)
    if missing:
        loc.append(missing.group(1))
    kind = next((k for prefix, k in _KINDS if msg.startswith(prefix)), "invalid")
    if kind == "type" and ", got `" not in msg:
        kind = "constraint"  # "Expected `int` >= 1": the type fits, a constraint does not
    return {"loc": loc, "msg": msg, "type": kind}


class ResponseValidationError(Exception):
    """A handler's result does not match its return annotation (a server error: 500)."""
