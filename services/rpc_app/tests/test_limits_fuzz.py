"""Property tests for the raw-text depth measurement (``raw_depth_exceeds``) and the engine's limit
verdicts: whatever the JSON (brackets, quotes and backslashes inside strings and keys, any spacing,
escaped or literal non-ASCII), the text-based answer equals a plain recursive depth count."""

import json

import orjson
from hypothesis import given, settings, strategies as st

from rpc_app.errors import LimitExceeded
from rpc_app.limits import Limits, raw_depth_exceeds

TRICKY = st.text(alphabet=st.sampled_from('[]{}"\\\\ab\n\t\u00e9\u2028\U0001f600,:'), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | TRICKY
VALUES = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(TRICKY, kids, max_size=4),
                      max_leaves=40)


def depth(v) -> int:
    if isinstance(v, dict):
        return 1 + max(map(depth, v.values()), default=0)
    if isinstance(v, list):
        return 1 + max(map(depth, v), default=0)
    return 0


def texts(v):
    yield orjson.dumps(v)
    yield orjson.dumps(v, option=orjson.OPT_INDENT_2).decode()
    yield json.dumps(v)  # \\uXXXX escapes, ", " separators
    yield json.dumps(v, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_raw_depth_matches_recursive_count(v):
    d = depth(v)
    for raw in texts(v):
        for limit in range(max(0, d - 2), d + 3):
            assert raw_depth_exceeds(raw, limit) == (d > limit), (raw, limit, d)


@settings(max_examples=200, deadline=None)
@given(VALUES, st.integers(min_value=1, max_value=6))
def test_engine_verdict_matches_recursive_count(v, max_depth):
    lim = Limits(max_depth=max_depth)
    msg = {"jsonrpc": "2.0", "method": "echo", "params": [v] * 20, "id": 1}  # > _OPENS_CAP brackets often
    raw = orjson.dumps(msg)
    parsed = orjson.loads(raw)
    try:
        lim.validate(parsed, raw)
        refused = False
    except LimitExceeded as e:
        refused = e.limit == "nesting_depth"
    assert refused == (depth(msg) > max_depth)


def test_deep_bomb_and_bracket_strings():
    bomb = b"[" * 100_000 + b"]" * 100_000
    assert raw_depth_exceeds(bomb, 1000)
    assert not raw_depth_exceeds(b'{"a":"[[[[[[[[[[\\\\","b":"\\"[[[[[["}', 1)
    assert raw_depth_exceeds(b'{"a":"]]]]","b":[[]]}', 2)
    assert not raw_depth_exceeds(b"123", 0) and not raw_depth_exceeds('"[["', 0)
