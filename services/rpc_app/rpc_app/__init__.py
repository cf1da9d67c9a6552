"""rpc_app: a strict, fast JSON-RPC 2.0 engine with a WebSocket server and a Django Channels adapter."""

from .concurrency import Session
from .config import ServerConfig
from .context import RpcContext
from .engine import Engine, error_response
from .errors import InvalidParams, LimitExceeded, RpcError
from .limits import Limits
from .middleware import LoggingMiddleware, Middleware
from .ratelimit import RateLimit, TokenBucket
from .registry import MethodSpec, Registry, rpc_method

__all__ = [
    "Engine", "error_response", "Session", "RpcContext", "RpcError", "InvalidParams", "LimitExceeded",
    "Limits", "Middleware", "LoggingMiddleware", "RateLimit", "TokenBucket", "MethodSpec", "Registry",
    "rpc_method", "ServerConfig",
]
