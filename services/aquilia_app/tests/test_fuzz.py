"""Hypothesis fuzzing of the pattern parser and the matcher (bounded so it runs in seconds)."""
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aquilia_app.patterns import PatternError, parse
from aquilia_app.routing import Match, RouteConflict, Router, URLBuildError

FAST = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

pattern_chars = st.sampled_from(list("/{}«»[]:|=,-_.") + list("abcxyz019") + ["int", "str", "path", "uuid",
                                "float", "slug", "min", "max", "re", "in", "(", ")", "*", "?", "\x00", "é"])
pattern_text = st.lists(pattern_chars, max_size=30).map("".join)


@FAST
@given(pattern_text)
def test_parser_raises_only_pattern_error(text):
    try:
        parsed = parse(text)
    except PatternError:
        return
    assert parsed.variants and all(isinstance(v, tuple) for v in parsed.variants)


@FAST
@given(st.text(max_size=60))
def test_parser_arbitrary_unicode(text):
    try:
        parse("/" + text)
    except PatternError:
        pass


name = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6)
ptype = st.sampled_from(["int", "str", "slug", "float", "uuid"])
segment = st.one_of(name, st.tuples(ptype, st.sampled_from(["", "|min=1", "|max=50", "|in=1,2,3"])))


def render(segs):
    out, names = [], 0
    for s in segs:
        if isinstance(s, str):
            out.append(s)
        else:
            t, c = s
            if t in ("uuid",) and c:
                c = ""
            if t in ("str", "slug", "float") and c == "|in=1,2,3" and t == "float":
                c = "|in=1.0,2.5"
            out.append("{p%d:%s%s}" % (names, t, c))
            names += 1
    return "/" + "/".join(out)


route_sets = st.lists(st.lists(segment, min_size=0, max_size=4).map(render), min_size=1, max_size=12)
paths = st.one_of(
    st.lists(st.sampled_from(["a", "b", "1", "2", "50", "-3", "1.5", "x y", "", "é", "%2F",
                              "123e4567-e89b-12d3-a456-426614174000", "..", "a" * 300]), max_size=6)
    .map(lambda p: "/" + "/".join(p)),
    st.text(max_size=40),
)
methods = st.sampled_from(["GET", "POST", "HEAD", "DELETE", "BREW", "", "get"])


def build(patterns):
    r = Router()
    for i, p in enumerate(patterns):
        try:
            r.add(p, ["GET"] if i % 2 else ["GET", "POST"], i, name=f"r{i}")
        except PatternError:
            pass
    try:
        return r.compile()
    except RouteConflict:
        return None


@FAST
@given(route_sets, st.lists(st.tuples(methods, paths), max_size=8))
def test_matcher_never_raises(patterns, requests):
    r = build(patterns)
    if r is None:
        return
    for method, path in requests:
        m = r.match(method, path)
        assert isinstance(m, Match)
        assert m.status in (200, 404, 405)
        if m.status == 200:
            assert m.route is not None and set(m.params) == set(m.route.parsed.params)
        if m.status == 405:
            assert m.allow and method not in m.allow


values = {
    "int": st.integers(min_value=1, max_value=3),
    "str": st.text(alphabet=string.ascii_letters + " -.", min_size=1, max_size=5),
    "slug": st.text(alphabet=string.ascii_letters + "-_", min_size=1, max_size=5),
    "float": st.sampled_from([1.0, 2.5]),
    "uuid": st.uuids(),
}


@FAST
@given(route_sets, st.data())
def test_url_for_round_trip(patterns, data):
    r = build(patterns)
    if r is None:
        return
    for route in r.routes:
        (variant,) = route.parsed.variants
        params = {}
        for s in variant:
            if not isinstance(s, str):
                params[s.name] = data.draw(values[s.type])
        try:
            url = r.url_for(route.name, **params)
        except URLBuildError:
            continue  # a drawn value outside the constraints
        from urllib.parse import unquote
        m = r.match("GET", unquote(url))
        assert m.status == 200, (route.pattern, url)
