"""aquilia_app: a fast async ASGI web framework (typed routes, DI, controllers) and its reference app.

The framework is split one concept per module: ``patterns`` (path patterns and castors), ``routing``
(the compiled matcher), ``di`` (container and scopes), ``controllers`` (class controllers and the
parameter-binding plans), ``requests``, ``responses``, ``middleware``, ``query`` (the ``Q`` builder),
``templates`` (Jinja2), ``metrics`` (Prometheus), ``application`` (``App``) and ``server`` (CLI).
``aquilia_app.app`` is the reference app.
"""
from .application import App
from .background import BackgroundTasks
from .compression import CompressionMiddleware
from .controllers import Body, Controller, Cookie, Form, Header, Query, delete, get, patch, post, put, route
from .cors import CORSMiddleware
from .di import APP, REQUEST, SINGLETON, Container, CycleError, DIError, MissingDependency, ScopeError
from .exceptions import (BadRequest, HTTPException, MethodNotAllowed, NotFound, PayloadTooLarge, RequestTimeout,
                         ResponseValidationError, ServiceUnavailable, UnsupportedMediaType, ValidationFailed)
from .files import FileResponse, StaticFiles
from .forms import FormData, FormLimits, UploadFile
from .groups import RouteGroup
from .middleware import ASGIMiddleware, FunctionMiddleware, Middleware, MiddlewareStack
from .patterns import PatternError
from .proxy_headers import ProxyHeadersMiddleware
from .query import Q, QueryError
from .requests import Request
from .request_id import RequestIdMiddleware, current_request_id
from .responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse, problem
from .routing import RouteConflict, Router, URLBuildError
from .sessions import SessionMiddleware
from .sse import EventSourceResponse, ServerSentEvent
from .state import State
from .timeouts import TimeoutMiddleware
from .trusted_hosts import TrustedHostMiddleware
from .websockets import WebSocket, WebSocketDisconnect, WebSocketState

__all__ = [
    "App", "BackgroundTasks", "Body", "Controller", "Cookie", "Form", "Header", "Query",
    "delete", "get", "patch", "post", "put", "route",
    "APP", "REQUEST", "SINGLETON", "Container", "CycleError", "DIError", "MissingDependency", "ScopeError",
    "BadRequest", "HTTPException", "MethodNotAllowed", "NotFound", "PayloadTooLarge", "RequestTimeout",
    "ServiceUnavailable", "ValidationFailed", "ResponseValidationError",
    "ASGIMiddleware", "FunctionMiddleware", "Middleware", "MiddlewareStack", "PatternError", "Q", "QueryError", "Request",
    "HTMLResponse", "JSONResponse", "RedirectResponse", "Response", "StreamingResponse", "problem",
    "FileResponse", "StaticFiles", "EventSourceResponse", "ServerSentEvent", "FormData", "FormLimits", "UploadFile",
    "WebSocket", "WebSocketDisconnect", "WebSocketState", "UnsupportedMediaType",
    "CORSMiddleware", "CompressionMiddleware", "RequestIdMiddleware", "current_request_id", "SessionMiddleware",
    "TimeoutMiddleware", "TrustedHostMiddleware", "ProxyHeadersMiddleware",
    "RouteConflict", "Router", "URLBuildError", "State", "RouteGroup",
]
