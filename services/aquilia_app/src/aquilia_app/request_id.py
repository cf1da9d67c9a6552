"""Request ids, as native middleware: each request gets an id - the client's (or proxy's) own when
it sent a usable one, else a new one - which is sent back in the response header and readable by
any code running for the request through ``current_request_id()`` (a context variable: the
``Request`` object stays as it is).  ``RequestIdLogFilter`` puts it on log records.

The id is set while the middleware chain and the handler run.  It is not set any more when a
streaming response's body is produced or background tasks run (after the chain has returned).
"""
from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import Callable

from .middleware import Middleware

__all__ = ["RequestIdMiddleware", "RequestIdLogFilter", "current_request_id", "request_id"]

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 token: a header name


def current_request_id() -> str | None:
    """The id of the request being handled, or None outside one."""
    return request_id.get()


def _uuid4_hex() -> str:
    return uuid.uuid4().hex


def valid_id(value: str, max_length: int) -> bool:
    """Visible ASCII (0x21-0x7e: no spaces, no controls - it goes into logs and headers) and at most
    ``max_length`` characters."""
    return 0 < len(value) <= max_length and value.isascii() and value.isprintable() and " " not in value


class RequestIdLogFilter(logging.Filter):
    """Adds ``record.request_id`` (``-`` outside a request), e.g. for ``%(request_id)s`` in a format."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get() or "-"
        return True


class RequestIdMiddleware(Middleware):
    """See the module docstring.  ``trust_incoming=False``: always a new id (when the clients are not
    trusted to choose it).  ``generator``: a callable returning the new id (a str)."""

    def __init__(self, header: str = "x-request-id", generator: Callable[[], str] = _uuid4_hex,
                 trust_incoming: bool = True, max_length: int = 200):
        if not isinstance(header, str) or not _TOKEN.match(header):
            raise ValueError(f"header must be a header name (an RFC 9110 token), not {header!r}")
        if not callable(generator):
            raise TypeError(f"generator must be a callable returning a str, not {generator!r}")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 1 <= max_length <= 1024:
            raise ValueError(f"max_length must be an int between 1 and 1024, not {max_length!r}")
        self.header = header.lower()
        self.generator = generator
        self.trust_incoming = bool(trust_incoming)
        self.max_length = max_length

    def new_id(self) -> str:
        value = self.generator()
        if not isinstance(value, str) or not valid_id(value, self.max_length):
            raise ValueError(f"the request id generator returned {value!r}: not a visible-ASCII str of at most "
                             f"{self.max_length} characters")
        return value

    async def __call__(self, request, call_next):
        rid = request.header(self.header) if self.trust_incoming else None
        if rid is None or not valid_id(rid, self.max_length):
            rid = self.new_id()
        token = request_id.set(rid)
        try:
            response = await call_next(request)
        finally:
            request_id.reset(token)
        return response.with_headers([(self.header, rid)], replace=True)
