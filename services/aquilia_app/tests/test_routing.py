import uuid

import pytest

from aquilia_app.routing import RouteConflict, Router, URLBuildError


def build(*routes):
    r = Router()
    for pattern, methods, name in routes:
        r.add(pattern, methods, f"{methods[0]} {pattern}", name)
    return r.compile()


def ep(m):
    return m.route.endpoint if m.route else None


def test_static_hit_and_params():
    r = build(("/ping", ["GET"], None), ("/users/{id:int}", ["GET"], None), ("/users/{id:int}/posts/{slug:slug}", ["GET"], None))
    assert ep(r.match("GET", "/ping")) == "GET /ping"
    m = r.match("GET", "/users/12/posts/hello-world")
    assert m.params == {"id": 12, "slug": "hello-world"}
    assert r.match("GET", "/users/12").params == {"id": 12}


def test_404_and_405_with_allow():
    r = build(("/items", ["GET", "POST"], None), ("/items/{id:int}", ["GET", "DELETE"], None))
    m = r.match("PUT", "/items")
    assert m.status == 405 and m.allow == ("GET", "HEAD", "POST")
    m = r.match("PATCH", "/items/3")
    assert m.status == 405 and m.allow == ("DELETE", "GET", "HEAD")
    assert r.match("GET", "/items/x").status == 404
    assert r.match("GET", "/nothing").status == 404
    assert r.match("GET", "/items/3/extra").status == 404
    assert r.match("GET", "").status == 404
    assert r.match("GET", "/items/").status == 404  # trailing slash is a different path


def test_head_falls_back_to_get():
    r = build(("/a", ["GET"], None), ("/b/{x}", ["GET"], None))
    assert ep(r.match("HEAD", "/a")) == "GET /a"
    assert ep(r.match("HEAD", "/b/1")) == "GET /b/{x}"


def test_specificity_static_then_int_then_str():
    r = build(("/u/{name:str}", ["GET"], None), ("/u/{id:int}", ["GET"], None), ("/u/me", ["GET"], None),
              ("/u/{u:uuid}", ["GET"], None), ("/u/{rest:path}", ["GET"], None))
    assert ep(r.match("GET", "/u/me")) == "GET /u/me"
    assert ep(r.match("GET", "/u/5")) == "GET /u/{id:int}"
    assert ep(r.match("GET", "/u/bob")) == "GET /u/{name:str}"
    assert ep(r.match("GET", f"/u/{uuid.uuid4()}")) == "GET /u/{u:uuid}"
    m = r.match("GET", "/u/a/b/c")
    assert ep(m) == "GET /u/{rest:path}" and m.params == {"rest": "a/b/c"}


def test_constrained_before_unconstrained_and_backtracking():
    r = build(("/n/{a:int|max=9}/x", ["GET"], None), ("/n/{b:int}/y", ["GET"], None), ("/n/{c:str}/x", ["GET"], None))
    assert ep(r.match("GET", "/n/5/x")) == "GET /n/{a:int|max=9}/x"
    assert ep(r.match("GET", "/n/50/y")) == "GET /n/{b:int}/y"
    m = r.match("GET", "/n/50/x")  # int branch fails deeper: backtracks to str
    assert ep(m) == "GET /n/{c:str}/x" and m.params == {"c": "50"}


def test_method_specific_branches():
    r = build(("/k/{id:int}", ["GET"], None), ("/k/{name:str}", ["POST"], None))
    assert ep(r.match("POST", "/k/5")) == "POST /k/{name:str}"
    assert r.match("PUT", "/k/5").allow == ("GET", "HEAD", "POST")


def test_optional_params_default_none():
    r = build(("/posts[/{page:int}]", ["GET"], None))
    assert r.match("GET", "/posts").params == {"page": None}
    assert r.match("HEAD", "/posts").params == {"page": None}
    assert r.match("GET", "/posts/3").params == {"page": 3}


def test_ambiguous_routes_rejected():
    with pytest.raises(RouteConflict, match="ambiguous"):
        build(("/a/{x:int}", ["GET"], None), ("/a/{y:int}", ["GET"], None))
    with pytest.raises(RouteConflict):
        build(("/a", ["GET"], None), ("/a", ["GET", "POST"], None))
    with pytest.raises(RouteConflict):
        build(("/a[/{p:int}]", ["GET"], None), ("/a/{q:int}", ["GET"], None))
    # same shape, different methods: fine
    build(("/a/{x:int}", ["GET"], None), ("/a/{y:int}", ["POST"], None))


def test_duplicate_name_and_bad_method():
    with pytest.raises(RouteConflict, match="name"):
        build(("/a", ["GET"], "n"), ("/b", ["GET"], "n"))
    with pytest.raises(ValueError):
        build(("/a", ["FETCH"], None))


def test_url_building():
    r = build(("/users/{id:int|min=1}/files/{rest:path}", ["GET"], "file"), ("/posts[/{page:int}]", ["GET"], "posts"),
              ("/s/{name}", ["GET"], "s"))
    assert r.url_for("file", id=5, rest="a/b c.txt") == "/users/5/files/a/b%20c.txt"
    assert r.url_for("posts") == "/posts"
    assert r.url_for("posts", page=2) == "/posts/2"
    assert r.url_for("s", name="a/b?") == "/s/a%2Fb%3F"
    with pytest.raises(URLBuildError, match="no route named"):
        r.url_for("nope")
    with pytest.raises(URLBuildError, match="does not match"):
        r.url_for("file", id=0, rest="x")
    with pytest.raises(URLBuildError, match="exactly the parameters"):
        r.url_for("file", id=3)
    with pytest.raises(URLBuildError):
        r.url_for("posts", page="x")


def test_dynamic_lookup_does_not_walk_every_route():
    r = Router()
    for i in range(2000):
        r.add(f"/r{i}/{{id:int}}", ["GET"], i)
    r.compile()
    calls = 0
    import aquilia_app.routing as routing

    orig = routing._walk

    def counting(*a):
        nonlocal calls
        calls += 1
        return orig(*a)

    routing._walk = counting
    try:
        assert r.match("GET", "/r1999/7").route.endpoint == 1999
    finally:
        routing._walk = orig
    assert calls <= 4  # one call per tree level, not per route


def _slash_app(**options):
    from aquilia_app import App
    from aquilia_app.testclient import TestClient

    app = App(**options)

    @app.get("/users")
    async def users():
        return ["users"]

    @app.post("/forms/")
    async def form():
        return ["form"]

    @app.get("/files/{name:path}")
    async def files(name: str):
        return [name]

    @app.get("/a b%/")
    async def odd():
        return ["odd"]

    @app.get("/{rest:path|re=.*[.]txt}")
    async def text(rest: str):
        return [rest]

    return TestClient(app)


def test_the_other_form_of_a_trailing_slash_is_a_307_with_the_query_kept():
    with _slash_app() as c:
        r = c.get("/users/?page=2&q=a%20b")
        assert r.status_code == 307 and r.headers["location"] == "/users?page=2&q=a%20b"
        r = c.post("/forms", json={"a": 1})  # 307: the client sends the same method and body again
        assert r.status_code == 307 and r.headers["location"] == "/forms/"
        r = c.get("/a%20b%25")  # the path is decoded to match: its redirect is encoded again
        assert r.status_code == 307 and r.headers["location"] == "/a%20b%25/"
        assert c.get(r.headers["location"]).json() == ["odd"]
        assert c.get("/users/", follow_redirects=True).json() == ["users"]


def test_no_redirect_where_neither_form_matches_or_it_would_leave_the_site():
    with _slash_app() as c:
        assert c.get("/nobody/").status_code == 404
        assert c.post("/users/").status_code == 404  # /users takes GET only
        assert c.get("/").status_code == 404
        assert c.get("/files/").status_code == 404  # a path parameter is never empty
        assert c.get("http://testserver//evil.example/a.txt").json() == ["/evil.example/a.txt"]
        # a Location of "//evil.example/a.txt" would send the browser to that host: no redirect
        assert c.get("http://testserver//evil.example/a.txt/").status_code == 404
    with _slash_app(redirect_slashes=False) as c:
        assert c.get("/users/").status_code == 404


def test_url_for_a_float_segment_takes_any_finite_float():
    """``str(1e-05)`` is ``1e-05``, which a ``float`` segment refuses: url_for writes it without an exponent,
    so that every finite float builds a URL that routes back to the same value."""
    r = build(("/f/{x:float}", ["GET"], "f"))
    for value in (1.5, 3.0, -0.25, 1e-05, 1e20, 123456789.125, 5e-324):
        url = r.url_for("f", x=value)
        assert "e" not in url and r.match("GET", url).params == {"x": value}
    for bad in (float("inf"), float("nan")):
        with pytest.raises(URLBuildError):
            r.url_for("f", x=bad)
