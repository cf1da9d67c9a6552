"""Micro-benchmarks of the audited hot paths: aquilia_app vs the closest peer vs a naive version.

    python bench/bench_micro.py [--repeat 5] [--json out.json]

Each row: nanoseconds per operation (best of --repeat runs) and the factor of the peer/naive time
over aquilia_app's (> 1 means aquilia_app is faster).  Same process, same run, so the ratios are
comparable even on a noisy machine; absolute times are not.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import inspect
import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import orjson  # noqa: E402

from aquilia_app.di import REQUEST, SINGLETON, Container  # noqa: E402
from aquilia_app.middleware import MiddlewareStack  # noqa: E402
from aquilia_app.query import Q  # noqa: E402
from aquilia_app.responses import Response  # noqa: E402
from aquilia_app.routing import Router  # noqa: E402

PAYLOAD = {"message": "Hello, World!", "service": "aquilia_app", "version": 1, "ok": True, "ratio": 0.75,
           "tags": ["fast", "async", "typed", "asgi"], "numbers": [1, 2, 3, 4, 5, 6, 7, 8],
           "nested": {"id": 42, "name": "answer", "active": False, "score": 99.5}}


def timeit_sync(fn, n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t) / n)
    return best


def timeit_async(make_coro, n: int, repeat: int) -> float:
    async def run():
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter_ns()
            for _ in range(n):
                await make_coro()
            best = min(best, (time.perf_counter_ns() - t) / n)
        return best

    try:
        import uvloop
        return uvloop.run(run())
    except ImportError:  # pragma: no cover
        return asyncio.run(run())


# -- 1. route matching -------------------------------------------------------------------------
ROUTES = [("/ping", "GET"), ("/json", "GET"), ("/json-large", "GET"), ("/html", "GET"), ("/healthz", "GET"),
          ("/metrics", "GET"), ("/items", "GET"), ("/items", "POST")]
for i in range(20):
    ROUTES += [(f"/api/v1/res{i}", "GET"), (f"/api/v1/res{i}/{{id:int}}", "GET"),
               (f"/api/v1/res{i}/{{id:int}}/sub/{{name:str}}", "GET")]
ROUTES += [("/items/{id:int}", "GET"), ("/items/{id:int}", "PUT"), ("/items/{id:int}", "DELETE"),
           ("/users/{uid:uuid}/posts/{slug:slug}", "GET")]
HIT_DYNAMIC = "/api/v1/res17/123/sub/abc"
HIT_STATIC = "/healthz"
MISS = "/api/v1/nothing/here"


def make_ours():
    r = Router()
    for p, m in ROUTES:
        r.add(p, [m], p)
    return r.compile()


def make_starlette():
    from starlette.routing import Route, Router as SRouter

    async def ep(request):  # pragma: no cover
        return None

    def conv(p):
        return re.sub(r"\{(\w+):(int|str|uuid|slug)\}", lambda m: "{%s:%s}" % (m.group(1), "str" if m.group(2) == "slug" else m.group(2)), p)

    return SRouter([Route(conv(p), ep, methods=[m]) for p, m in ROUTES])


def starlette_match(router, method, path):
    from starlette.routing import Match

    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    partial = None
    for route in router.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route, child
        if match is Match.PARTIAL and partial is None:
            partial = route
    return partial, None


_NAIVE_RX = {"int": r"[^/]+", "str": r"[^/]+", "uuid": r"[^/]+", "slug": r"[^/]+"}
_NAIVE_CAST = {"int": int, "str": str, "uuid": str, "slug": str}


def make_naive():
    """Linear scan of one regex per route; castors run in a thread pool (the audited original)."""
    table = []
    for p, m in ROUTES:
        casts = {}

        def repl(mt, casts=casts):
            casts[mt.group(1)] = _NAIVE_CAST[mt.group(2)]
            return "(?P<%s>%s)" % (mt.group(1), _NAIVE_RX[mt.group(2)])
        rx = re.compile("^" + re.sub(r"\{(\w+):(\w+)\}", repl, p) + "$")
        table.append((rx, m, casts))
    return table


async def naive_match(table, method, path, pool, loop):
    allowed = []
    for rx, m, casts in table:
        mt = rx.match(path)
        if mt is None:
            continue
        try:
            params = {}
            for k, v in mt.groupdict().items():
                params[k] = await loop.run_in_executor(pool, casts[k], v)
        except ValueError:
            continue
        if m == method:
            return params
        allowed.append(m)
    return None


_TYPED_RX = {"int": r"-?[0-9]+", "str": r"[^/]+", "uuid": r"[0-9a-fA-F-]{36}", "slug": r"[A-Za-z0-9_-]+"}


def make_regex_per_method():
    """The alternative design: one compiled alternation regex per method, castors inline."""
    from aquilia_app.patterns import NO, Param, parse

    by_method = {}
    for i, (p, m) in enumerate(ROUTES):
        (variant,) = parse(p).variants
        parts, casts = [], []
        for seg in variant:
            if isinstance(seg, Param):
                parts.append("(?P<g%d_%s>%s)" % (i, seg.name, _TYPED_RX[seg.type]))
                casts.append((f"g{i}_{seg.name}", seg.name, seg.cast))
            else:
                parts.append(re.escape(seg))
        by_method.setdefault(m, []).append((i, "/" + "/".join(parts), tuple(casts)))
    compiled = {}
    for m, entries in by_method.items():
        rx = re.compile("(?:" + "|".join("(?P<r%d>%s)" % (i, body) for i, body, _ in entries) + r")\Z")
        compiled[m] = (rx.match, {f"r{i}": (i, casts) for i, _, casts in entries})

    static = {(p, m): i for i, (p, m) in enumerate(ROUTES) if "{" not in p}

    def match(method, path):
        hit = static.get((path, method))
        if hit is not None:
            return hit, {}
        ent = compiled.get(method)
        if ent is None:
            return None
        mt = ent[0](path)
        if mt is None:
            return None
        i, casts = ent[1][mt.lastgroup]
        params = {}
        for g, name, cast in casts:
            v = cast(mt.group(g))
            if v is NO:
                return None
            params[name] = v
        return i, params
    return match


def bench_routing(n, repeat):
    rx_match = make_regex_per_method()
    assert rx_match("GET", HIT_DYNAMIC)[1] == {"id": 123, "name": "abc"}, rx_match("GET", HIT_DYNAMIC)

    ours, st, naive = make_ours(), make_starlette(), make_naive()
    assert ours.match("GET", HIT_DYNAMIC).params == {"id": 123, "name": "abc"}
    assert starlette_match(st, "GET", HIT_DYNAMIC)[1]["path_params"] == {"id": 123, "name": "abc"}
    rows = []
    pool = ThreadPoolExecutor(4)
    for label, path in (("hit dynamic", HIT_DYNAMIC), ("hit static", HIT_STATIC), ("miss", MISS)):
        a = timeit_sync(lambda: ours.match("GET", path), n, repeat)
        b = timeit_sync(lambda: starlette_match(st, "GET", path), n, repeat)

        async def naive_once():
            return await naive_match(naive, "GET", path, pool, asyncio.get_running_loop())
        c = timeit_async(naive_once, max(n // 20, 200), repeat)
        rows.append((f"route match: {label} ({len(ROUTES)} routes)", a, "starlette Router", b, "linear regex + thread-pool castors", c))
        d = timeit_sync(lambda: rx_match("GET", path), n, repeat)
        rows.append((f"  design alternative: {label}", a, "one regex per method", d, "-", None))
    pool.shutdown()
    return rows


# -- 2. request scope creation + resolve ----------------------------------------------------------
class Settings:
    def __init__(self):
        self.dsn = "sqlite://"


class Pool:
    def __init__(self, settings: Settings):
        self.settings = settings


class Conn:
    def __init__(self, pool: Pool):
        self.pool = pool


class Repo:
    def __init__(self, conn: Conn):
        self.conn = conn


def make_container():
    c = Container()
    c.register(Settings, scope=SINGLETON)
    c.register(Pool, scope=SINGLETON)
    for i in range(30):  # a realistic number of other providers
        c.register(type(f"Other{i}", (), {}), scope=REQUEST)

    async def conn(pool: Pool):
        yield Conn(pool)
    c.register(Conn, conn, scope=REQUEST)
    c.register(Repo, scope=REQUEST)
    return c.compile()


class NaiveScope:
    """Copies every provider map into the scope and introspects signatures at resolve time."""

    def __init__(self, providers: dict, singletons: dict):
        self.providers = copy.copy(providers)
        self.singletons = dict(singletons)
        self.cache = {}

    async def resolve(self, token):
        if token in self.singletons:
            return self.singletons[token]
        if token in self.cache:
            return self.cache[token]
        factory = self.providers[token]
        sig = inspect.signature(factory, eval_str=True)
        kwargs = {name: await self.resolve(p.annotation) for name, p in sig.parameters.items()}
        if inspect.isasyncgenfunction(factory):
            gen = factory(**kwargs)
            value = await gen.__anext__()
        else:
            value = factory(**kwargs)
        self.cache[token] = value
        return value


def bench_di(n, repeat):
    c = make_container()

    async def ours_once():
        s = c.request_scope()
        await s.resolve(Repo)
        await s.aclose()

    async def start():
        await c.startup()
    asyncio.run(start())

    async def conn_gen(pool: Pool):
        yield Conn(pool)
    providers = {Repo: Repo, Conn: conn_gen}
    for i in range(30):
        providers[f"o{i}"] = object
    singletons = {Pool: Pool(Settings()), Settings: Settings()}

    async def naive_once():
        s = NaiveScope(providers, singletons)
        await s.resolve(Repo)

    rows = []
    a = timeit_async(ours_once, n, repeat)
    c_ = timeit_async(naive_once, n, repeat)
    peer_name, b = "fastapi Depends (solve_dependencies)", None
    try:
        b = _fastapi_di(n, repeat)
    except Exception as e:  # pragma: no cover - peer missing or API drift
        peer_name = f"fastapi unavailable ({type(e).__name__})"
    rows.append(("request scope + resolve Repo->Conn(teardown)->Pool", a, peer_name, b, "copied maps + per-call introspection", c_))
    return rows


def _fastapi_di(n, repeat):
    from contextlib import AsyncExitStack

    from fastapi import Depends
    from fastapi.dependencies.utils import get_dependant, solve_dependencies
    from starlette.requests import Request as SRequest

    pool = Pool(Settings())

    def get_pool():
        return pool

    async def get_conn(p: Pool = Depends(get_pool)):
        yield Conn(p)

    def get_repo(conn: Conn = Depends(get_conn)):
        return Repo(conn)

    async def endpoint(repo: Repo = Depends(get_repo)):  # pragma: no cover
        return repo

    dep = get_dependant(path="/", call=endpoint)
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}

    async def once():
        async with AsyncExitStack() as inner, AsyncExitStack() as outer:
            sc = dict(scope, fastapi_inner_astack=inner, fastapi_function_astack=outer)
            req = SRequest(sc)
            await solve_dependencies(request=req, dependant=dep, async_exit_stack=inner, embed_body_fields=False)
    return timeit_async(once, n, repeat)


# -- 3. Response.json --------------------------------------------------------------------------------
def bench_json(n, repeat):
    from starlette.responses import JSONResponse

    def naive():  # decode/encode round-trip of the original
        text = orjson.dumps(PAYLOAD).decode()
        body = text.encode()
        headers = {"content-type": "application/json", "content-length": str(len(body))}
        return body, [(k.encode(), v.encode()) for k, v in headers.items()]

    a = timeit_sync(lambda: Response.json(PAYLOAD), n, repeat)
    b = timeit_sync(lambda: JSONResponse(PAYLOAD), n, repeat)
    c = timeit_sync(naive, n, repeat)
    return [("Response.json (~200 B object)", a, "starlette JSONResponse", b, "orjson decode/encode + header dict", c)]


# -- 4. middleware chain call -----------------------------------------------------------------------
def _mw(tag):
    class M:
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            await self.app(scope, receive, send)
    M.__name__ = tag
    return M


_START = {"type": "http.response.start", "status": 200, "headers": []}


async def _endpoint(scope, receive, send):
    await send(_START)


async def _send(msg):
    return None


async def _receive():  # pragma: no cover
    return {}


def bench_middleware(n, repeat):
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    mws = [(_mw(f"m{i}"), 100 - i * 10) for i in range(4)]
    stack = MiddlewareStack()
    for f, prio in mws:
        stack.add(f, prio)
    chain = stack.build(_endpoint)
    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}

    async def ours():
        await chain(scope, _receive, _send)

    async def naive():  # sort and wrap on every request
        app = _endpoint
        for f, _ in sorted(mws, key=lambda e: e[1], reverse=True):
            app = f(app)
        await app(scope, _receive, _send)

    sapp = Starlette(middleware=[Middleware(f) for f, _ in sorted(mws, key=lambda e: e[1])])
    # Starlette's stack wraps ServerErrorMiddleware + user middleware + ExceptionMiddleware around
    # the router; call it with our endpoint as the router.
    sapp.router = _endpoint
    st_chain = sapp.build_middleware_stack()

    async def starlette_call():
        await st_chain(scope, _receive, _send)

    a = timeit_async(ours, n, repeat)
    b = timeit_async(starlette_call, n, repeat)
    c = timeit_async(naive, n, repeat)
    return [("middleware chain call (4 middlewares)", a, "starlette middleware stack", b, "sort + wrap per request", c)]


# -- 5. Q chain of 4 operations -----------------------------------------------------------------------
class NaiveQ:
    """Clones through __init__ with deep copies of its lists."""

    def __init__(self, table, where=None, params=None, order=None, limit=None):
        self.table = table
        self.where = copy.deepcopy(where or [])
        self.params = copy.deepcopy(params or [])
        self.order = copy.deepcopy(order or [])
        self.limit_ = limit

    def _clone(self):
        return NaiveQ(self.table, self.where, self.params, self.order, self.limit_)

    def filter(self, **kw):
        q = self._clone()
        for k, v in kw.items():
            col, _, op = k.partition("__")
            q.where.append(f'"{col}" {">=" if op == "gte" else "="} ?')
            q.params.append(v)
        return q

    def exclude(self, **kw):
        q = self._clone()
        for k, v in kw.items():
            q.where.append(f'NOT ("{k}" = ?)')
            q.params.append(v)
        return q

    def order_by(self, *f):
        q = self._clone()
        q.order.extend(f)
        return q

    def limit(self, n):
        q = self._clone()
        q.limit_ = n
        return q

    def sql(self):
        s = f'SELECT * FROM "{self.table}"'
        if self.where:
            s += " WHERE " + " AND ".join(self.where)
        if self.order:
            s += " ORDER BY " + ", ".join(self.order)
        return s + " LIMIT ?", tuple(self.params) + (self.limit_,)


def bench_query(n, repeat):
    def ours():
        return Q("items").filter(price__gte=10).exclude(name="x").order("-price").limit(20).sql()

    def naive():
        return NaiveQ("items").filter(price__gte=10).exclude(name="x").order_by('"price" DESC').limit(20).sql()

    rows = []
    peer, b = "no peer query builder installed", None
    try:
        from pypika import Order, Parameter, Query, Table  # noqa: F401
        t = Table("items")

        def pypika():
            return Query.from_(t).select("*").where(t.price >= Parameter("?")).where(t.name != Parameter("?")).orderby(t.price, order=Order.desc).limit(20).get_sql()
        peer, b = "pypika", timeit_sync(pypika, n, repeat)
    except ImportError:
        pass
    a = timeit_sync(ours, n, repeat)
    c = timeit_sync(naive, n, repeat)
    rows.append(("Q chain of 4 ops + sql()", a, peer, b, "clone via __init__ + deepcopy", c))
    return rows


# -- 6. template render (the reference app's /html page) ---------------------------------------------
def bench_template(n, repeat):
    import jinja2

    from aquilia_app.app import HERE, HTML_ROWS
    from aquilia_app.templates import DictFirstEnvironment, Templates

    class StockCodegen(DictFirstEnvironment):  # dict-first lookups, but a Markup per output value
        code_generator_class = jinja2.Environment.code_generator_class

    ctx = {"title": "aquilia_app", "service": "aquilia_app", "rows": HTML_ROWS}
    opts = dict(loader=jinja2.FileSystemLoader(os.path.join(HERE, "html")), autoescape=True)
    ours = Templates(os.path.join(HERE, "html")).get("page.html")
    stock = jinja2.Environment(**opts).get_template("page.html")
    per_call = StockCodegen(**opts).get_template("page.html")
    assert ours.render(ctx) == stock.render(ctx) == per_call.render(ctx)
    a = timeit_sync(lambda: ours.render(ctx), n, repeat)
    b = timeit_sync(lambda: stock.render(ctx), n, repeat)
    c = timeit_sync(lambda: per_call.render(ctx), n, repeat)
    return [("Jinja2 render of /html (12 dict rows)", a, "stock jinja2", b, "stock codegen + dict-first getattr", c)]


# -- 7. instrumentation (a whole /json request through the RSGI entry, in one process) ----------------
class _RSGIScope:  # the fields App.__rsgi__ reads from granian's scope
    proto, method, path, query_string, http_version, scheme = "http", "GET", "/json", "", "1.1", "http"
    client, server = "127.0.0.1:40000", "127.0.0.1:8081"
    headers = {"host": "127.0.0.1:8081", "user-agent": "perfkit-load"}  # granian's has a dict's items()/get()


class _RSGIProto:
    def response_bytes(self, status, headers, body):
        pass


def instrumentation_apps():
    """The reference app three times: metrics on, metrics off, and recording into prometheus-client on
    every request (the naive version)."""
    import atexit
    import shutil
    import tempfile

    from aquilia_app.app import create_app
    from aquilia_app.metrics import Metrics

    class DirectMetrics(Metrics):
        def observe_request(self, route, method, status, seconds):
            self.requests.labels(self.service, route, method, f"{status // 100}xx").observe(seconds)

    folder = tempfile.mkdtemp(prefix="bench_micro_")
    atexit.register(shutil.rmtree, folder, True)
    db = os.path.join(folder, "items.sqlite3")
    on, off, direct = create_app(db, metrics=True), create_app(db, metrics=False), create_app(db, metrics=True)
    direct.metrics.__class__ = DirectMetrics
    return on, off, direct


def bench_instrumentation(n, repeat, apps=None):
    """The recording a request pays (Metrics.observe_request: a list slot) against the same app with
    metrics off and against recording straight into prometheus-client (labels() + observe() per request).
    Interleaved rounds, best of each, so a drift of the machine hits all three alike."""
    apps = apps or instrumentation_apps()
    scope, proto = _RSGIScope(), _RSGIProto()

    async def run():
        for app in apps:
            await app.startup()
        best = [float("inf")] * 3
        for _ in range(repeat):
            for i, app in enumerate(apps):
                call = app.__rsgi__
                t = time.perf_counter_ns()
                for _ in range(n):
                    await call(scope, proto)
                best[i] = min(best[i], (time.perf_counter_ns() - t) / n)
        for app in apps:
            await app.shutdown()
        return best

    try:
        import uvloop
        a, b, c = uvloop.run(run())
    except ImportError:  # pragma: no cover
        a, b, c = asyncio.run(run())
    return [("request /json via __rsgi__, metrics on", a, "metrics off", b,
             "prometheus-client observe per request", c)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20000, help="operations per timing")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write results as JSON to this file")
    a = ap.parse_args(argv)
    rows = []
    for bench in (bench_routing, bench_di, bench_json, bench_middleware, bench_query, bench_template,
                  bench_instrumentation):
        rows += bench(a.n, a.repeat)
    print(f"{'hot path':52} {'aquilia_app':>12} {'peer':>12} {'x':>6} {'naive':>12} {'x':>6}  peer / naive")
    out = []
    for name, ours, peer, pt, naive, nt in rows:
        pf = f"{pt / ours:6.2f}" if pt else "     -"
        nf = f"{nt:10.0f}ns {nt / ours:6.1f}" if nt else "           -      -"
        print(f"{name:52} {ours:10.0f}ns {(f'{pt:10.0f}ns' if pt else '           -')} {pf} {nf}  {peer} / {naive}")
        out.append({"hotpath": name, "ours_ns": ours, "peer": peer, "peer_ns": pt, "naive": naive, "naive_ns": nt})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
