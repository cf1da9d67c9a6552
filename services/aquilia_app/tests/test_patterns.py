import uuid

import pytest

from aquilia_app.patterns import NO, Param, PatternError, parse


def segs(pattern):
    (v,) = parse(pattern).variants
    return v


def test_static_and_typed_segments_both_syntaxes():
    for p in ("/users/«id:int»/posts", "/users/{id:int}/posts"):
        s = segs(p)
        assert s[0] == "users" and s[2] == "posts"
        assert isinstance(s[1], Param) and s[1].name == "id" and s[1].type == "int"


def test_default_type_is_str():
    (p,) = [s for s in segs("/a/{name}") if isinstance(s, Param)]
    assert p.type == "str" and p.cast("x") == "x" and p.cast("") is NO


@pytest.mark.parametrize("ptype,good,bad", [
    ("int", [("42", 42), ("-7", -7), ("0", 0), ("9" * 4300, int("9" * 4300))],
     ["4.2", "abc", "+5", " 5", "5_0", "²", "", "-", "9" * 4301, "-" + "9" * 5000]),  # int() converts 4300 digits
    ("float", [("1.5", 1.5), ("-2", -2.0), ("3", 3.0)], ["nan", "inf", "1e5", "1.", ".5", "abc", "9" * 400]),
    ("slug", [("a-b_c9", "a-b_c9")], ["a b", "ä", "a.b", ""]),
    ("str", [("anything goes", "anything goes")], [""]),
])
def test_castors(ptype, good, bad):
    p = segs("/{x:%s}" % ptype)[0]
    for raw, val in good:
        assert p.cast(raw) == val
    for raw in bad:
        assert p.cast(raw) is NO, raw


def test_uuid_castor():
    p = segs("/{u:uuid}")[0]
    u = uuid.uuid4()
    assert p.cast(str(u)) == u
    assert p.cast("not-a-uuid") is NO
    assert p.cast("x" * 36) is NO


def test_constraints_min_max_in_re():
    p = segs("/{n:int|min=1|max=10}")[0]
    assert p.cast("1") == 1 and p.cast("10") == 10
    assert p.cast("0") is NO and p.cast("11") is NO
    s = segs("/{s:str|min=2|max=3}")[0]
    assert s.cast("ab") == "ab" and s.cast("a") is NO and s.cast("abcd") is NO
    c = segs("/{c:slug|in=red,green}")[0]
    assert c.cast("red") == "red" and c.cast("blue") is NO
    r = segs("/{r:str|re=[a-z]+[0-9]}")[0]
    assert r.cast("abc1") == "abc1" and r.cast("abc") is NO and r.cast("1abc1") is NO
    i = segs("/{i:int|in=1,2,3}")[0]
    assert i.cast("2") == 2 and i.cast("4") is NO


def test_path_type_last_only():
    v = segs("/files/{rest:path}")
    assert v[1].type == "path"
    with pytest.raises(PatternError, match="last segment"):
        parse("/files/{rest:path}/x")


def test_optional_segments_expand():
    parsed = parse("/posts[/{page:int}[/{size:int}]]")
    shapes = sorted(len(v) for v in parsed.variants)
    assert shapes == [1, 2, 3]
    assert parsed.params == ("page", "size")


@pytest.mark.parametrize("bad,msg", [
    ("users", "start with '/'"),
    ("/a/{id:int", "unclosed"),
    ("/a/id:int}", "unexpected"),
    ("/a/{id:bogus}", "unknown parameter type"),
    ("/a/{1id}", "invalid parameter name"),
    ("/a/{id}/{id}", "appears twice"),
    ("/a/x{id}", "whole path segment"),
    ("/a/{a}{b}", "whole path segment"),
    ("/a/{id:int|min=x}", "not a valid int"),
    ("/a/{id:int|foo=1}", "unknown constraint"),
    ("/a/{id:int|re=x}", "str/slug/path only"),
    ("/a/{id:str|re=(}", "invalid regex"),
    ("/a/{id:int|in=1,x}", "one-of value"),
    ("/a/{id:int|min}", "key=value"),
    ("/a/{id:uuid|min=1}", "does not apply"),
    ("/a[/b", "unclosed '\\['"),
    ("/a]/b", "unbalanced"),
    ("/a?x=1", "not allowed"),
    ("/a/{x:int|min=1|min=2}", "given twice"),
])
def test_pattern_errors(bad, msg):
    with pytest.raises(PatternError, match=msg):
        parse(bad)


def test_non_str_pattern():
    with pytest.raises(PatternError):
        parse(None)  # type: ignore[arg-type]
