"""The engine alone: every JSON-RPC 2.0 rule, with the specification's own examples."""

import asyncio

import orjson
import pytest

from rpc_app import Engine, Limits, Middleware, RateLimit, Registry, RpcContext, RpcError, Session
from rpc_app.metrics import Metrics


def spec_registry():
    reg = Registry()

    @reg.method()
    def subtract(minuend, subtrahend):
        return minuend - subtrahend

    @reg.method()
    def sum(*xs):  # noqa: A001
        return __builtins__["sum"](xs) if isinstance(__builtins__, dict) else __import__("builtins").sum(xs)

    @reg.method()
    def update(*xs):
        return None

    @reg.method()
    def notify_hello(*xs):
        return None

    @reg.method()
    def echo(value=None):
        return value

    @reg.method()
    def get_data():
        return ["hello", 5]

    @reg.method()
    def add(a: int, b: int):
        return a + b

    @reg.method()
    async def aadd(a: int, b: int):
        await asyncio.sleep(0)
        return a + b

    @reg.method()
    def kw(a, *, b, c=3):
        return [a, b, c]

    @reg.method()
    def fail():
        raise ValueError("secret detail")

    @reg.method()
    def fail_rpc():
        raise RpcError(-32050, "app error", {"x": 1})

    @reg.method()
    def whoami(ctx: RpcContext):
        return {"method": ctx.method, "id": ctx.request_id, "notification": ctx.is_notification}

    @reg.method()
    def not_json():
        return object()

    @reg.method(blocking=True)
    def blocking(x: int):
        import time
        time.sleep(0.01)
        return x * 2

    return reg


@pytest.fixture
def engine():
    return Engine(spec_registry())


def run(engine, data, session=None):
    if isinstance(data, (dict, list)):
        data = orjson.dumps(data)
    out = asyncio.run(engine.handle_async(data, session))
    return None if out is None else orjson.loads(out)


# --- the specification's examples -------------------------------------------------------

def test_positional_params(engine):
    assert run(engine, b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}') == \
        {"jsonrpc": "2.0", "result": 19, "id": 1}
    assert run(engine, b'{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}') == \
        {"jsonrpc": "2.0", "result": -19, "id": 2}


def test_named_params(engine):
    assert run(engine, b'{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}') \
        == {"jsonrpc": "2.0", "result": 19, "id": 3}
    assert run(engine, b'{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}') \
        == {"jsonrpc": "2.0", "result": 19, "id": 4}


def test_notifications_get_no_response(engine):
    assert run(engine, b'{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}') is None
    assert run(engine, b'{"jsonrpc": "2.0", "method": "foobar"}') is None
    # errors in notifications are not reported either
    assert run(engine, b'{"jsonrpc": "2.0", "method": "add", "params": [1]}') is None
    assert run(engine, b'{"jsonrpc": "2.0", "method": "fail"}') is None
    assert run(engine, b'{"jsonrpc": "2.0", "method": "aadd", "params": [1, 2]}') is None


def test_method_not_found(engine):
    r = run(engine, b'{"jsonrpc": "2.0", "method": "foobar", "id": "1"}')
    assert r["id"] == "1" and r["error"]["code"] == -32601 and r["error"]["message"] == "Method not found"


def test_invalid_json(engine):
    r = run(engine, b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    assert r["id"] is None and r["error"]["code"] == -32700


def test_invalid_request_object(engine):
    r = run(engine, b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
    assert r == {"jsonrpc": "2.0", "error": r["error"], "id": None}
    assert r["error"]["code"] == -32600


def test_batch_invalid_json(engine):
    r = run(engine, b'[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]')
    assert isinstance(r, dict) and r["error"]["code"] == -32700 and r["id"] is None


def test_empty_batch(engine):
    r = run(engine, b"[]")
    assert isinstance(r, dict) and r["error"]["code"] == -32600 and r["id"] is None


def test_invalid_batch_items(engine):
    r = run(engine, b"[1]")
    assert len(r) == 1 and r[0]["error"]["code"] == -32600 and r[0]["id"] is None
    r = run(engine, b"[1,2,3]")
    assert [x["error"]["code"] for x in r] == [-32600] * 3


def test_mixed_batch(engine):
    r = run(engine, b"""[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"},
        {"jsonrpc": "2.0", "method": "aadd", "params": [2, 3], "id": "10"}
    ]""")
    by_id = {}
    for x in r:
        by_id.setdefault(x["id"], []).append(x)
    assert len(r) == 6
    assert by_id["1"][0]["result"] == 7
    assert by_id["2"][0]["result"] == 19
    assert by_id[None][0]["error"]["code"] == -32600
    assert by_id["5"][0]["error"]["code"] == -32601
    assert by_id["9"][0]["result"] == ["hello", 5]
    assert by_id["10"][0]["result"] == 5


def test_batch_of_notifications(engine):
    assert run(engine, b'[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},'
                       b'{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]') is None


# --- request object rules ---------------------------------------------------------------

@pytest.mark.parametrize("raw", [b'"hello"', b"42", b"null", b"true"])
def test_non_object_request(engine, raw):
    r = run(engine, raw)
    assert r["error"]["code"] == -32600 and r["id"] is None


@pytest.mark.parametrize("version", ["1.0", 2.0, None, "2"])
def test_wrong_version(engine, version):
    r = run(engine, {"jsonrpc": version, "method": "add", "params": [1, 2], "id": 7})
    assert r["error"]["code"] == -32600 and r["id"] == 7
    assert "2.0" in r["error"]["data"]


def test_missing_version(engine):
    r = run(engine, {"method": "add", "params": [1, 2], "id": 7})
    assert r["error"]["code"] == -32600


@pytest.mark.parametrize("bad_id", [[1], {"a": 1}, True])
def test_bad_id_type(engine, bad_id):
    r = run(engine, {"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": bad_id})
    assert r["error"]["code"] == -32600 and r["id"] is None


def test_null_id_and_string_and_float_ids(engine):
    for rid in (None, "abc", 1.5, -3):
        r = run(engine, {"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": rid})
        assert r == {"jsonrpc": "2.0", "result": 3, "id": rid}


def test_params_must_be_structured(engine):
    r = run(engine, {"jsonrpc": "2.0", "method": "add", "params": 5, "id": 1})
    assert r["error"]["code"] == -32600 and "params" in r["error"]["data"]


def test_invalid_utf8(engine):
    r = run(engine, b'{"jsonrpc":"2.0","method":"echo","params":["\xff\xfe"],"id":1}')
    assert r["error"]["code"] == -32700 and r["id"] is None
    assert "UTF-8" in r["error"]["data"]


def test_str_input(engine):
    r = run(engine, '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')
    assert r["result"] == 3


# --- params checked against the signature ---------------------------------------------------

@pytest.mark.parametrize("params,needle", [
    ([1], "takes 2 positional params, got 1"),
    ([1, 2, 3], "takes 2 positional params, got 3"),
    ({"a": 1}, "missing required params: b"),
    ({"a": 1, "b": 2, "c": 3}, "unexpected params: c"),
    (["x", 2], "param 'a' must be integer, got string"),
    ({"a": 1, "b": None}, "param 'b' must be integer, got null"),
])
def test_invalid_params(engine, params, needle):
    r = run(engine, {"jsonrpc": "2.0", "method": "add", "params": params, "id": 1})
    assert r["error"]["code"] == -32602 and needle in r["error"]["data"], r


def test_keyword_only_params(engine):
    r = run(engine, {"jsonrpc": "2.0", "method": "kw", "params": {"a": 1, "b": 2}, "id": 1})
    assert r["result"] == [1, 2, 3]
    r = run(engine, {"jsonrpc": "2.0", "method": "kw", "params": [1], "id": 1})
    assert r["error"]["code"] == -32602 and "named params: b" in r["error"]["data"]


def test_context_is_injected_and_not_a_param(engine):
    r = run(engine, {"jsonrpc": "2.0", "method": "whoami", "id": 9})
    assert r["result"] == {"method": "whoami", "id": 9, "notification": False}
    r = run(engine, {"jsonrpc": "2.0", "method": "whoami", "params": {"ctx": 1}, "id": 9})
    assert r["error"]["code"] == -32602


def test_introspection_happens_once_at_registration():
    reg = Registry()

    @reg.method()
    def f(a: int, ctx: RpcContext, b: str = "x"):
        return [a, b, ctx.method]

    spec = reg.get("f")
    assert spec.ctx_param == "ctx" and spec.positional == ("a",) and spec.required == ("a",)
    assert spec.names == {"a", "b"}
    eng = Engine(reg)
    assert run(eng, {"jsonrpc": "2.0", "method": "f", "params": {"a": 1, "b": "y"}, "id": 1})["result"] == [1, "y", "f"]


def test_registry_rejects_bad_registrations():
    reg = Registry()
    with pytest.raises(ValueError):
        reg.add(lambda: 1, name="rpc.reserved")
    reg.add(lambda: 1, name="x")
    with pytest.raises(ValueError):
        reg.add(lambda: 2, name="x")

    async def a():
        return 1
    with pytest.raises(TypeError):
        reg.add(a, name="y", blocking=True)


# --- errors from methods ------------------------------------------------------------------

def test_method_raising_hides_traceback(engine):
    r = run(engine, {"jsonrpc": "2.0", "method": "fail", "id": 1})
    assert r == {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Internal error"}, "id": 1}
    assert b"secret detail" not in orjson.dumps(r)


def test_method_raising_debug_shows_traceback():
    eng = Engine(spec_registry(), debug=True)
    r = run(eng, {"jsonrpc": "2.0", "method": "fail", "id": 1})
    assert r["error"]["code"] == -32603
    assert "secret detail" in r["error"]["data"]["exception"]
    assert "Traceback" in r["error"]["data"]["traceback"]


def test_rpc_error_passes_through(engine):
    r = run(engine, {"jsonrpc": "2.0", "method": "fail_rpc", "id": 1})
    assert r["error"] == {"code": -32050, "message": "app error", "data": {"x": 1}}


def test_unserializable_result(engine):
    r = run(engine, {"jsonrpc": "2.0", "method": "not_json", "id": 1})
    assert r["error"]["code"] == -32603
    r = run(engine, [{"jsonrpc": "2.0", "method": "not_json", "id": 1}, {"jsonrpc": "2.0", "method": "add", "params": [1, 1], "id": 2}])
    assert r[0]["error"]["code"] == -32603 and r[1]["result"] == 2


def test_async_and_blocking_methods(engine):
    assert run(engine, {"jsonrpc": "2.0", "method": "aadd", "params": [1, 2], "id": 1})["result"] == 3
    assert run(engine, {"jsonrpc": "2.0", "method": "blocking", "params": [21], "id": 1})["result"] == 42


def test_sync_call_needs_no_await(engine):
    out = engine.handle(b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')
    assert out == b'{"jsonrpc":"2.0","result":3,"id":1}'


# --- limits (-32001) ----------------------------------------------------------------------

def small_engine(**kw):
    return Engine(spec_registry(), limits=Limits(**kw))


def test_deep_nesting_100000_no_recursion_error():
    eng = Engine(spec_registry())
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
                b'{"jsonrpc":"2.0","method":"echo","id":1,"params":[' + b"[" * 100_000 + b"]" * 100_001 + b"}"):
        r = run(eng, raw)
        assert r["error"]["code"] == -32001 and r["error"]["data"]["limit"] == "nesting_depth"
        assert r["id"] is None


def test_depth_limit_below_parser_limit():
    eng = small_engine(max_depth=5)
    ok = {"jsonrpc": "2.0", "method": "echo", "params": [[[1]]], "id": 1}  # depth 4
    assert run(eng, ok)["result"] == [[1]]
    bad = {"jsonrpc": "2.0", "method": "add", "params": [[[[[1]]]]], "id": 1}
    r = run(eng, bad)
    assert r["error"]["code"] == -32001 and r["error"]["data"] == {"limit": "nesting_depth", "max": 5}
    # brackets inside strings do not count
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": ["[[[[[[[[[[", 1], "id": 1})
    assert r["error"]["code"] == -32602


def test_array_length_limit():
    eng = small_engine(max_array_length=100)
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": [list(range(101)), 1], "id": 1})
    assert r["error"]["code"] == -32001 and r["error"]["data"]["limit"] == "array_length"
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": [list(range(100)), 1], "id": 1})
    assert r["error"]["code"] == -32602  # within limits; wrong type for add


def test_object_members_count_as_length():
    eng = small_engine(max_array_length=10)
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": [{str(i): i for i in range(11)}, 1], "id": 1})
    assert r["error"]["data"]["limit"] == "array_length"


def test_string_length_limit_values_and_keys():
    eng = small_engine(max_string_length=50)
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": ["x" * 51, 1], "id": 1})
    assert r["error"]["code"] == -32001 and r["error"]["data"]["limit"] == "string_length"
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": [{"k" * 51: 1}, 1], "id": 1})
    assert r["error"]["data"]["limit"] == "string_length"


def test_message_bytes_limit():
    eng = small_engine(max_message_bytes=1000)
    r = run(eng, {"jsonrpc": "2.0", "method": "add", "params": ["x" * 2000, 1], "id": 1})
    assert r["error"]["code"] == -32001 and r["error"]["data"]["limit"] == "message_bytes"
    r = run(eng, '{"jsonrpc":"2.0","method":"echo","params":["' + "é" * 600 + '"],"id":1}')
    assert r["error"]["data"]["limit"] == "message_bytes"  # 1200 bytes in UTF-8


def test_method_name_length_limit():
    eng = small_engine(max_method_name_length=8)
    r = run(eng, {"jsonrpc": "2.0", "method": "m" * 9, "id": 1})
    assert r["error"]["code"] == -32001 and r["error"]["data"]["limit"] == "method_name_length"


def test_size_bomb_many_small_arrays():
    eng = small_engine(max_array_length=1000)
    bomb = b'{"jsonrpc":"2.0","method":"echo","id":1,"params":[' + b",".join([b"[1,2]"] * 1001) + b"]}"
    r = run(eng, bomb)
    assert r["error"]["data"]["limit"] == "array_length"


def test_bad_limits_config():
    with pytest.raises(ValueError):
        Limits(max_depth=0)
    with pytest.raises(ValueError):
        Limits(max_depth=5000)


# --- middleware, rate limit, metrics --------------------------------------------------------

def test_middleware_before_after_and_refuse():
    seen = []

    class Audit(Middleware):
        def before_call(self, ctx, params):
            if ctx.method == "subtract":
                raise RpcError(-32010, "forbidden")
            seen.append(("before", ctx.method, params))

        def after_call(self, ctx, result, error):
            seen.append(("after", ctx.method, result, error.code if error else None))

    eng = Engine(spec_registry(), middleware=[Audit()])
    assert run(eng, {"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 1})["result"] == 3
    assert run(eng, {"jsonrpc": "2.0", "method": "subtract", "params": [1, 2], "id": 1})["error"]["code"] == -32010
    assert run(eng, {"jsonrpc": "2.0", "method": "aadd", "params": [1, 2], "id": 1})["result"] == 3
    assert seen == [("before", "add", [1, 2]), ("after", "add", 3, None), ("after", "subtract", None, -32010),
                    ("before", "aadd", [1, 2]), ("after", "aadd", 3, None)]


def test_async_middleware():
    class Slow(Middleware):
        async def before_call(self, ctx, params):
            await asyncio.sleep(0)

    eng = Engine(spec_registry(), middleware=[Slow()])
    out = eng.handle(b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')
    assert asyncio.iscoroutine(out)
    assert orjson.loads(asyncio.run(out))["result"] == 3


def test_rate_limit_per_connection():
    eng = Engine(spec_registry(), rate_limit=RateLimit(rate=1, burst=3))

    async def go():
        sent = []

        async def send(b):
            sent.append(orjson.loads(b))
        s1 = Session(eng, send)
        s2 = Session(eng, send)
        for i in range(5):
            await s1.feed(orjson.dumps({"jsonrpc": "2.0", "method": "add", "params": [1, 1], "id": i}))
        await s2.feed(b'{"jsonrpc":"2.0","method":"add","params":[1,1],"id":"other"}')
        return sent

    sent = asyncio.run(go())
    codes = [x.get("error", {}).get("code") for x in sent]
    assert codes == [None, None, None, -32002, -32002, None]


def test_metrics_counts_and_sampled_stages():
    m = Metrics(sample_every=1)
    eng = Engine(spec_registry(), metrics=m)
    for _ in range(3):
        run(eng, {"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 1})
    run(eng, {"jsonrpc": "2.0", "method": "nope", "id": 1})
    run(eng, {"jsonrpc": "2.0", "method": "fail", "id": 1})
    text = m.render().decode()
    assert 'rpc_calls_total{method="add",outcome="ok",service="rpc_app"} 3.0' in text
    assert 'rpc_calls_total{method="(unknown)",outcome="not_found",service="rpc_app"} 1.0' in text
    assert 'rpc_calls_total{method="fail",outcome="error",service="rpc_app"} 1.0' in text
    for stage in ("parse", "validate", "dispatch", "encode"):
        assert f'perfkit_hotpath_duration_seconds_count{{hotpath="{stage}",service="rpc_app"}}' in text
    assert 'perfkit_hotpath_duration_seconds_count{hotpath="parse",service="rpc_app"} 5.0' in text
    # every call of a registered method is timed, failed ones included; an unknown method creates no series
    assert 'rpc_call_duration_seconds_count{method="add",service="rpc_app"} 3.0' in text
    assert 'rpc_call_duration_seconds_count{method="fail",service="rpc_app"} 1.0' in text
    assert 'method="nope"' not in text and 'rpc_call_duration_seconds_count{method="(unknown)"' not in text


def test_async_calls_are_timed_and_openmetrics_is_negotiated():
    m = Metrics()
    eng = Engine(spec_registry(), metrics=m)
    for _ in range(2):  # blocking=True: a thread hop and a 10 ms sleep
        asyncio.run(eng.handle_async(orjson.dumps({"jsonrpc": "2.0", "method": "blocking", "params": [1], "id": 1})))
    body, ctype = m.exposition("application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
    text = body.decode()
    assert 'rpc_call_duration_seconds_count{method="blocking",service="rpc_app"} 2.0' in text
    assert 'rpc_call_duration_seconds_bucket{le="0.005",method="blocking",service="rpc_app"} 0.0' in text


def test_depth_check_many_containers_both_ways():
    """Many containers (the dump-and-find path) and few (the walk), just under and just over the limit."""
    from rpc_app.limits import CHECK_DEPTH, Limits
    from rpc_app.errors import LimitExceeded
    lim = Limits(max_depth=6)

    def nest(d):  # a container of depth d (d >= 1)
        v = []
        for _ in range(d - 1):
            v = [v]
        return v
    for many in (1, 100):
        # {"params": [...]} is depth 2, so elements nest(4) reach depth 6
        ok = {"params": [nest(4) for _ in range(many)] + ["[[[[[[[[[[[", "\n            ["]}
        lim.check(ok, CHECK_DEPTH)
        bad = {"params": [nest(4) for _ in range(many)] + [nest(5)]}
        with pytest.raises(LimitExceeded):
            lim.check(bad, CHECK_DEPTH)
        bad_empty = {"params": [nest(4) for _ in range(many)] + [{"k": [[[{}]]]}]}
        with pytest.raises(LimitExceeded):
            lim.check(bad_empty, CHECK_DEPTH)
