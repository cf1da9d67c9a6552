"""aquilia_app: a fast async ASGI web framework (typed routes, DI, controllers) and its reference app.

The framework is split one concept per module: ``patterns`` (path patterns and castors), ``routing``
(the compiled matcher), ``di`` (container and scopes), ``controllers`` (class controllers and the
parameter-binding plans), ``requests``, ``responses``, ``middleware``, ``query`` (the ``Q`` builder),
``templates`` (Jinja2), ``metrics`` (Prometheus), ``application`` (``App``) and ``server`` (CLI).
``aquilia_app.app`` is the reference app.
"""
from .application import App
from .controllers import Body, Controller, delete, get, patch, post, put, route
from .di import APP, REQUEST, SINGLETON, Container, CycleError, DIError, MissingDependency, ScopeError
from .exceptions import (BadRequest, HTTPException, NotFound, PayloadTooLarge, RequestTimeout, ServiceUnavailable,
                         ValidationFailed)
from .middleware import Middleware, MiddlewareStack
from .patterns import PatternError
from .query import Q, QueryError
from .requests import Request
from .responses import HTMLResponse, JSONResponse, Response, StreamingResponse, problem
from .routing import RouteConflict, Router, URLBuildError

__all__ = [
    "App", "Body", "Controller", "delete", "get", "patch", "post", "put", "route",
    "APP", "REQUEST", "SINGLETON", "Container", "CycleError", "DIError", "MissingDependency", "ScopeError",
    "BadRequest", "HTTPException", "NotFound", "PayloadTooLarge", "RequestTimeout", "ServiceUnavailable",
    "ValidationFailed",
    "Middleware", "MiddlewareStack", "PatternError", "Q", "QueryError", "Request",
    "HTMLResponse", "JSONResponse", "Response", "StreamingResponse", "problem",
    "RouteConflict", "Router", "URLBuildError",
]
