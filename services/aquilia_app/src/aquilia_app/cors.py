"""CORS: cross-origin resource sharing as the WHATWG Fetch standard (section 3.2, "CORS protocol")
describes it, as native middleware.

* A preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) is answered here,
  before routing: 204 with the allowed methods, headers and ``Max-Age``, or a 400 problem saying
  which of origin, method or header is not allowed.
* Any other request with an allowed ``Origin`` gets ``Access-Control-Allow-Origin`` (the origin
  itself, or ``*`` when every origin is allowed without credentials), ``-Allow-Credentials`` and
  ``-Expose-Headers``.  ``*`` never goes out with credentials (browsers refuse it): with
  ``allow_origins=["*"]`` and ``allow_credentials=True`` every origin is echoed.
* Caches (Fetch 3.2.5): when every origin gets the same answer (``*``), *every* response says
  ``Access-Control-Allow-Origin: *`` and none says ``Vary: Origin``; otherwise every response - a
  request without ``Origin`` too - says ``Vary: Origin``, so a cache never serves one origin's answer
  to another.

The header logic is written here by hand: it is a few comparisons, and the framework's own
``Request``/``Response`` objects are not those of any CORS library.
"""
from __future__ import annotations

import re
from typing import Iterable

from .middleware import Middleware
from .responses import Response, problem

__all__ = ["CORSMiddleware"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 token: method and header names
_ORIGIN = re.compile(r"[a-z][a-z0-9+.\-]*://[^/?#\s]+\Z")  # scheme://host[:port], nothing after
# Request headers every preflight may name: the CORS-safelisted ones (Fetch 2.2.2).  content-type is
# among them because a JSON API's clients send it with a value that is not safelisted.
_SAFELISTED = frozenset(("accept", "accept-language", "content-language", "content-type"))
_PREFLIGHT_VARY = ("vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
# Fetch 3.2.3: '*' in Access-Control-Allow-Headers never covers Authorization; it must be named.
_NON_WILDCARD = "authorization"


def _names(values: Iterable[str], what: str, upper: bool) -> tuple:
    """Validated method or header names (``*`` passes)."""
    if isinstance(values, str):
        raise TypeError(f"{what} is a list of names, not the string {values!r}")
    out = []
    for v in values:
        if not isinstance(v, str) or not (v == "*" or _TOKEN.match(v)):
            raise ValueError(f"{what}: {v!r} is not a valid name")
        out.append(v.upper() if upper else v.lower())
    if "*" in out and len(out) > 1:
        raise ValueError(f"{what}: '*' already allows everything; give it alone")
    return tuple(dict.fromkeys(out))


def _origins(values: Iterable[str]) -> tuple:
    if isinstance(values, str):
        raise TypeError(f"allow_origins is a list of origins, not the string {values!r}")
    out = []
    for o in values:
        if not isinstance(o, str):
            raise TypeError(f"allow_origins: {o!r} is not a str")
        low = o.lower()
        if low != "*" and low != "null" and not _ORIGIN.match(low):
            raise ValueError(f"allow_origins: {o!r} is not an origin: scheme://host[:port], with no path "
                             "and no trailing '/' (a browser's Origin never has one)")
        out.append(low)
    if "*" in out and len(out) > 1:
        raise ValueError("allow_origins: '*' already allows every origin; give it alone")
    return tuple(out)


class CORSMiddleware(Middleware):
    """See the module docstring.  ``allow_origins=["*"]`` allows every origin (with credentials:
    each origin is echoed, as browsers refuse ``*`` then); ``allow_origin_regex`` is matched against
    the whole origin.  ``allow_methods`` / ``allow_headers`` of ``["*"]`` allow any."""

    def __init__(self, allow_origins: Iterable[str] = (), allow_origin_regex: str | None = None,
                 allow_methods: Iterable[str] = ("GET", "HEAD", "POST"), allow_headers: Iterable[str] = (),
                 allow_credentials: bool = False, expose_headers: Iterable[str] = (), max_age: int = 600):
        origins = _origins(allow_origins)
        if isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0:
            raise ValueError(f"max_age must be an int >= 0 (seconds), not {max_age!r}")
        if not origins and allow_origin_regex is None:
            raise ValueError("CORS allows no origin: give allow_origins and/or allow_origin_regex")
        self.any_origin = origins == ("*",)
        # every origin gets the same '*' answer, unless credentials make each one echo its origin
        self.star = self.any_origin and not allow_credentials
        if self.any_origin and allow_origin_regex is not None:
            raise ValueError("allow_origin_regex is pointless with allow_origins=['*']")
        self.origins = frozenset(origins)
        self.origin_regex = re.compile(allow_origin_regex) if allow_origin_regex is not None else None
        self.methods = _names(allow_methods, "allow_methods", upper=True)
        self.headers = _names(allow_headers, "allow_headers", upper=False)
        self.credentials = bool(allow_credentials)
        self.max_age = str(max_age)
        expose = _names(expose_headers, "expose_headers", upper=False)
        if expose == ("*",) and allow_credentials:
            raise ValueError("expose_headers=['*'] means the literal header name '*' on credentialed requests")
        self._actual = self._actual_headers(expose)
        self._names = ("access-control-allow-origin", *(k for k, _ in self._actual))

    def _actual_headers(self, expose: tuple) -> list:
        """The fixed part of an allowed actual response's CORS headers (origin added per request)."""
        out = []
        if self.credentials:
            out.append(("access-control-allow-credentials", "true"))
        if expose:
            out.append(("access-control-expose-headers", ", ".join(expose)))
        return out

    def origin_allowed(self, origin: str) -> bool:
        if self.any_origin:
            return True
        if origin.lower() in self.origins:
            return True
        return self.origin_regex is not None and self.origin_regex.fullmatch(origin) is not None

    async def __call__(self, request, call_next):
        origin = request.header("origin")
        if request.method == "OPTIONS" and origin is not None:
            wanted = request.header("access-control-request-method")
            if wanted is not None:
                return self.preflight(origin, wanted, request.headers.get("access-control-request-headers"))
        response = await call_next(request)
        # Ours replace a handler's own CORS headers (two Allow-Origin values fail in a browser); Vary adds up.
        if self.star:  # the same answer for all: also on requests without Origin (Fetch 3.2.5)
            return response.with_headers([("access-control-allow-origin", "*"), *self._actual], replace=self._names)
        if origin is None or not self.origin_allowed(origin):
            return response.with_headers([("vary", "Origin")])
        return response.with_headers([("access-control-allow-origin", origin), ("vary", "Origin"), *self._actual],
                                     replace=self._names)

    def preflight(self, origin: str, method: str, request_headers: str | None) -> Response:
        """The answer to a preflight: 204 with the permissions, or 400 saying what is refused."""
        if not self.origin_allowed(origin):
            return problem(400, "Bad Request", f"CORS preflight: origin {origin!r} is not allowed",
                           headers=[_PREFLIGHT_VARY])
        if self.methods != ("*",) and method not in self.methods:
            return problem(400, "Bad Request", f"CORS preflight: method {method!r} is not allowed "
                           f"(allowed: {', '.join(self.methods)})", headers=[_PREFLIGHT_VARY])
        asked = [h.strip().lower() for h in (request_headers or "").split(",") if h.strip()]
        if self.headers != ("*",):
            refused = [h for h in asked if h not in _SAFELISTED and h not in self.headers]
            if refused:
                return problem(400, "Bad Request", f"CORS preflight: request header(s) {', '.join(refused)} "
                               "not allowed", headers=[_PREFLIGHT_VARY])
        return Response(b"", 204, self._preflight_headers(origin, method, asked))

    def _preflight_headers(self, origin: str, method: str, asked: list) -> list:
        # '*' as a method or header list means "any" only on requests without credentials (Fetch
        # 3.2.3), so with credentials the request's own method and headers are echoed instead.
        any_method, any_header = self.methods == ("*",), self.headers == ("*",)
        if any_method:
            methods = method if self.credentials else "*"
        else:
            methods = ", ".join(self.methods)
        out = [("access-control-allow-origin", "*" if self.star else origin),
               ("access-control-allow-methods", methods), ("access-control-max-age", self.max_age)]
        if any_header and not self.credentials:
            out.append(("access-control-allow-headers", "*, authorization" if _NON_WILDCARD in asked else "*"))
        elif asked:
            out.append(("access-control-allow-headers", ", ".join(asked)))
        if self.credentials:
            out.append(("access-control-allow-credentials", "true"))
        out.append(_PREFLIGHT_VARY)
        return out
