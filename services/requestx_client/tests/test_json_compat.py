"""Response.json() gives what json.loads(response.text) gives, on every input: the same value (exact types:
big integers stay int, -0 is the int 0, NaN and Infinity accepted, duplicate keys last-wins, key order),
or the same error as requestx_client.exceptions.JSONDecodeError with json's msg, doc and pos."""

from __future__ import annotations

import json
import math
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import requestx_client as requests
from requestx_client import exceptions as exc
from requestx_client import models
from requestx_client._json import native_exact


def same(a, b) -> bool:
    """Equal values of exactly the same types (0 is not 0.0 nor -0.0; NaN equals NaN; key order counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def outcome(fn):
    try:
        return ("value", fn())
    except json.JSONDecodeError as e:
        return ("error", type(e), e.msg, e.doc, e.pos)
    except (ValueError, RecursionError) as e:  # json's int digit limit, nesting too deep
        return ("other", type(e))


@pytest.fixture(scope="module")
def check(server):
    s = requests.Session()

    def run(body: bytes, ctype: str = "application/json"):
        r = s.post(server.url + "/reflect?ct=" + quote(ctype), data=body)
        assert r.content == body
        got = outcome(r.json)
        want = outcome(lambda: json.loads(r.text))
        assert got[0] == want[0], (body, got, want)
        if got[0] == "value":
            assert same(got[1], want[1]), (body, got[1], want[1])
        elif got[0] == "error":
            assert got[1] is exc.JSONDecodeError and got[2:] == want[2:], (body, got, want)
        else:
            assert got == want
        return got

    yield run
    s.close()


EXPLICIT = [
    b'{"a": 1, "b": [true, false, null], "c": "\\u00e9\\ud83d\\ude00"}',
    b"18446744073709551615", b"18446744073709551616", b"-9223372036854775808", b"-9223372036854775809",
    b"9223372036854775807", b"123456789012345678901234567890", b"[-123456789012345678901234567890]",
    b"-0", b"[-0]", b'{"x":-0}', b"-0.0", b"-0e0", b"0e400",
    b"NaN", b"[Infinity, -Infinity, NaN]", b"1e400", b"-1e400", b"1e-400", b"5e-324", b"1.7976931348623157e308",
    b"0.1", b"0.30000000000000004", b"2.2250738585072014e-308", b"9007199254740993", b"9007199254740993.0",
    b'{"a": 1, "a": 2, "b": 3, "a": 4}', b'{"k": {"k": 1}, "k": [2]}',
    b'"\\ud800"', b'["\\udfff x"]', b'"\\ud83d\\ude00"',
    b"\xef\xbb\xbf{}", b"\xef\xbb\xbf[1]",
    b"", b" ", b"{", b"[1,]", b'{"a" 1}', b"{not: json", b"[1] x", b"tru", b"01", b"1.", b".5", b"+1", b"--1",
    b'"caf\xe9"', b'"\xff"', b'"a\x01b"', b'"tab\there"', b"[" * 200 + b"]" * 200, b"[" * 5000 + b"]" * 5000,
    b"1" * 5000, b'"' + b"x" * 70000 + b'"',
    '{"é": "ü"}'.encode("utf-16"), b'{"date": "2024-01-02T03:04:05-07:00", "id": "1234567890123456789012"}',
]


@pytest.mark.parametrize("body", EXPLICIT, ids=range(len(EXPLICIT)))
def test_explicit_inputs(check, body):
    check(body)


@pytest.mark.parametrize("ctype", ["application/json; charset=utf-8", "text/plain; charset=UTF8",
                                   "application/octet-stream", "text/plain", "application/json; charset=latin-1",
                                   "application/json; charset=utf-16"])
def test_content_types(check, ctype):
    for body in (b'{"a": "caf\xc3\xa9", "n": 18446744073709551616}', b'["caf\xe9"]', b"\xef\xbb\xbf[1]", b"[-0, 1]"):
        check(body, ctype)


def test_big_integer_in_a_large_body(check):
    body = json.dumps([{"id": i, "v": i * 0.5, "s": f"2024-01-{i % 28 + 1:02d}"} for i in range(20000)])
    body = body[:-1] + ", 340282366920938463463374607431768211457]"
    got = check(body.encode())
    assert got[1][-1] == 2 ** 128 + 1


def test_native_path_taken_for_ordinary_documents(server, monkeypatch):
    """Ordinary JSON (dates, negative numbers, floats) is parsed natively: json.loads is not called."""
    body = json.dumps([{"id": -i, "when": "2024-01-02", "x": -0.5, "big": 2 ** 63} for i in range(2000)]).encode()
    r = requests.post(server.url + "/reflect", data=body)
    want = json.loads(body)

    def refuse(*a, **k):
        raise AssertionError("json.loads was used")

    monkeypatch.setattr(models._json, "loads", refuse)
    assert same(r.json(), want)


def test_error_carries_json_details(server):
    r = requests.post(server.url + "/reflect", data=b'{"a": tru}')
    with pytest.raises(requests.JSONDecodeError) as e:
        r.json()
    assert (e.value.msg, e.value.doc, e.value.pos) == ("Expecting value", '{"a": tru}', 6)
    assert isinstance(e.value, json.JSONDecodeError) and isinstance(e.value, exc.InvalidJSONError)
    # keyword arguments go to json.loads
    r = requests.post(server.url + "/reflect", data=b'{"n": 1.5}')
    assert r.json(parse_float=str) == {"n": "1.5"}


def test_native_exact_scan():
    assert native_exact(b'[1, -2, 3.5, -0.25, "2024-01-02", 1234567890123456789]')
    for body in (b"-0", b"[-0]", b'{"a":-0}', b"-0 ", b"12345678901234567890", b"-1234567890123456789",
                 b"\xef\xbb\xbf{}"):
        assert not native_exact(body), body


# --- generated documents ---

_NUMBER = st.one_of(
    st.integers().map(str),
    st.integers(min_value=-(2 ** 140), max_value=2 ** 140).map(str),
    st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
    st.floats().map(json.dumps),  # NaN, Infinity, -Infinity included
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["-0", "-0.0", "0", "1E5", "1e+5", "1e400", "-1e400", "1e-400", "18446744073709551616",
                     "-9223372036854775809", "9223372036854775807"]),
)
_TEXT = st.text(max_size=12) | st.lists(st.sampled_from(["\ud800", "\udfff", "\ud83d\ude00", "a", "\x00", "\\"]),
                                        max_size=4).map("".join)
_STRING = st.one_of(_TEXT.map(json.dumps), st.text(max_size=12).map(lambda t: json.dumps(t, ensure_ascii=False)))
_KEY = st.one_of(_STRING, st.sampled_from(['"a"', '"b"']))  # a small set, so keys repeat
_WS = st.sampled_from(["", "", " ", "\n", "\t", " \r\n "])
_SCALAR = st.one_of(_NUMBER, _STRING, st.sampled_from(["true", "false", "null"]))


def _container(children):
    items = st.tuples(_WS, children, _WS).map("".join)
    array = st.lists(items, max_size=5).map(lambda xs: "[" + ",".join(xs) + "]")
    member = st.tuples(_WS, _KEY, _WS, items).map(lambda t: f"{t[0]}{t[1]}{t[2]}:{t[3]}")
    obj = st.lists(member, max_size=5).map(lambda xs: "{" + ",".join(xs) + "}")
    return array | obj


_DOC = st.tuples(_WS, st.recursive(_SCALAR, _container, max_leaves=25), _WS).map("".join)


@st.composite
def json_bodies(draw) -> bytes:
    doc = draw(_DOC)
    how = draw(st.sampled_from(["as is"] * 6 + ["truncated", "inserted", "bom", "garbage"]))
    if how == "truncated" and doc:
        doc = doc[:draw(st.integers(0, len(doc) - 1))]
    elif how == "inserted":
        at = draw(st.integers(0, len(doc)))
        doc = doc[:at] + draw(st.sampled_from([",", "]", "}", '"', "-", "0", "x", "\x01", " ", "e"])) + doc[at:]
    elif how == "bom":
        doc = "\ufeff" + doc
    elif how == "garbage":
        return draw(st.binary(max_size=40))
    return doc.encode("utf-8", "surrogatepass")  # a raw lone surrogate stays invalid UTF-8


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=json_bodies())
def test_generated_documents(check, body):
    check(body)
