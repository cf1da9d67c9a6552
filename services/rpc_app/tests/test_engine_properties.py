"""Properties of the in-process engine over random batches (Hypothesis): one answer per request id, none for
notifications, the same answers whatever the order, and ids of every JSON type returned unchanged."""

import asyncio
import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_app.engine import Engine
from rpc_app.methods import build_registry

ENGINE = Engine(build_registry())
SETTINGS = settings(max_examples=100, deadline=None)

ints = st.one_of(st.integers(-(2 ** 63), 2 ** 64 - 1),  # what orjson reads as integers
                 st.integers(2 ** 64, 2 ** 200), st.integers(-(2 ** 200), -(2 ** 63) - 1))  # and beyond
ids = st.one_of(st.text(st.characters(codec="utf-8"), max_size=20), ints,
                st.floats(allow_nan=False, allow_infinity=False), st.none())
small = st.integers(-1000, 1000)
json_values = st.recursive(
    st.none() | st.booleans() | small | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)

def ok(result):
    return "result", json.dumps(result, sort_keys=True)


# (method, params, expected outcome given the id): sync and async methods, answers and errors
calls = st.one_of(
    st.tuples(small, small).map(lambda ab: ("add", list(ab), lambda rid: ok(ab[0] + ab[1]))),
    st.tuples(small, small).map(lambda ab: ("add_async", list(ab), lambda rid: ok(ab[0] + ab[1]))),
    json_values.map(lambda v: ("echo", [v], lambda rid: ok(v))),
    st.just(("sleep", [0], lambda rid: ok({"slept": 0, "id": rid}))),
    st.just(("nope", [], lambda rid: ("error", -32601))),
    st.just(("add", [1], lambda rid: ("error", -32602))),
    st.just(("fail_rpc", [-32050], lambda rid: ("error", -32050))),
)


def key(rid):
    """Hashable and exact: 1, 1.0 and "1" differ."""
    return type(rid).__name__, rid


def dump_id(rid) -> str:
    return str(rid) if type(rid) is int else json.dumps(rid, ensure_ascii=False)


def member(rid, call, notification: bool) -> str:
    method, params, _ = call
    text = '{"jsonrpc":"2.0","method":%s,"params":%s' % (json.dumps(method), json.dumps(params))
    return text + ("}" if notification else ',"id":%s}' % dump_id(rid))


def answer(data: str):
    out = asyncio.run(ENGINE.handle_async(data.encode()))
    return None if out is None else json.loads(out)  # stdlib json: integers of any size stay exact


def outcomes(responses) -> set:
    def outcome(r):
        if "error" in r:
            return key(r["id"]), ("error", r["error"]["code"])
        return key(r["id"]), ok(r["result"])
    return {outcome(r) for r in responses}


batches = st.lists(st.tuples(ids, calls, st.booleans()), min_size=1, max_size=20, unique_by=lambda m: key(m[0]))


@SETTINGS
@given(batches, st.randoms(use_true_random=False))
def test_batch_one_answer_per_request_any_order(batch, rnd):
    requests = [(rid, call) for rid, call, notification in batch if not notification]
    text = "[" + ",".join(member(*m) for m in batch) + "]"
    got = answer(text)
    if not requests:
        assert got is None  # only notifications: nothing at all
        return
    assert Counter(key(r["id"]) for r in got) == Counter(key(rid) for rid, _ in requests)
    assert outcomes(got) == {(key(rid), call[2](rid)) for rid, call in requests}
    shuffled = list(batch)
    rnd.shuffle(shuffled)
    assert outcomes(answer("[" + ",".join(member(*m) for m in shuffled) + "]")) == outcomes(got)


@SETTINGS
@given(ids, st.sampled_from(["echo", "add_async", "sleep"]))
def test_ids_round_trip(rid, method):
    params = {"echo": [5], "add_async": [2, 3], "sleep": [0]}[method]
    raw = asyncio.run(ENGINE.handle_async(member(rid, (method, params, None), False).encode())).decode()
    r = json.loads(raw)
    assert key(r["id"]) == key(rid) and "result" in r, raw
    if type(rid) is int:  # byte for byte, beyond 64 bits too
        assert raw.endswith(',"id":%s}' % rid), raw
