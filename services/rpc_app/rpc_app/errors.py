"""JSON-RPC 2.0 error codes and the exception methods raise to return an error object."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Server errors: -32000 ... -32099
LIMIT_EXCEEDED = -32001
RATE_LIMITED = -32002
CALL_TIMEOUT = -32003
SERVER_SHUTTING_DOWN = -32004
PERMISSION_DENIED = -32005

MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    LIMIT_EXCEEDED: "Request over size limit",
    RATE_LIMITED: "Rate limit exceeded",
    CALL_TIMEOUT: "Call timed out",
    SERVER_SHUTTING_DOWN: "Server shutting down",
    PERMISSION_DENIED: "Permission denied",
}


class RpcError(Exception):
    """Raise from a method (or middleware) to answer with this error object.

    ``code`` should be an application code or one of the server codes above;
    ``data`` must be JSON-serializable.
    """

    __slots__ = ("code", "message", "data")

    def __init__(self, code: int, message: str | None = None, data: Any = None):
        self.code = code
        self.message = message if message is not None else MESSAGES.get(code, "Server error")
        self.data = data
        super().__init__(code, self.message)

    def to_dict(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class InvalidParams(RpcError):
    def __init__(self, detail: str):
        super().__init__(INVALID_PARAMS, "Invalid params", detail)


class LimitExceeded(RpcError):
    """A request broke a configured size limit (-32001)."""

    def __init__(self, limit: str, maximum: int, actual: int | None = None):
        data = {"limit": limit, "max": maximum}
        if actual is not None:
            data["actual"] = actual
        super().__init__(LIMIT_EXCEEDED, "Request over size limit", data)
        self.limit = limit
