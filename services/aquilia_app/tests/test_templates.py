"""Templates: compiled once, and ``obj.name`` on a plain dict looks the key up first (no exception per
lookup) while everything else renders exactly as stock Jinja2 renders it."""
import collections

import jinja2
import pytest
from markupsafe import Markup

from aquilia_app.templates import DictFirstEnvironment, Templates, escape_output

SOURCES = {
    "row": "{{ row.id }}|{{ row.message }}",
    "method_name": "{{ d.items }}",
    "missing": "[{{ d.nope }}]",
    "obj": "{{ o.real }}|{{ o.imag }}",
    "sub": "{{ d.id }}|{{ d.keys is callable }}",
    "escaped": "{{ row.message }}",
    "loop": "{% for r in rows %}{{ r.id }}:{{ r.message }};{% endfor %}",
    # lookups and output in every shape the code generator meets (nested, in calls, macros, blocks, loops...)
    "nested": "{{ a.b.c }}|{{ a.b.d.e }}|{{ a.x.y }}|{{ (a.b.c ~ a.b.d.e)|upper }}",
    "in_exprs": "{{ [a.b.c, {'k': a.b.d.e}] }}|{{ a.b.c if a.b else 'no' }}|{{ a.b.c + 1 }}|{{ a.b.c|string|length }}",
    "macro": "{% macro m(x) %}<{{ x.v }}:{{ caller() if caller else '' }}>{% endmacro %}"
             "{{ m(a.m) }}{% call m(a.m) %}{{ a.b.c }}{% endcall %}",
    "set_for": "{% set t = a.b %}{% for r in rows if r.id is odd %}{{ loop.index }}={{ r.id }}{{ t.c }};"
               "{% else %}none{% endfor %}{% for k in a.b|sort %}{{ k }},{% endfor %}",
    "recursive": "{% for n in tree recursive %}[{{ n.name }}{{ loop(n.kids) if n.kids }}]{% endfor %}",
    "filters": "{{ rows|map(attribute='id')|join(',') }}|{{ rows|selectattr('id', 'even')|map(attribute='message')|list }}",
    "methods": "{% for k, v in a.b.items() %}{{ k }}:{{ v is mapping }};{% endfor %}",
    # what the output escaper sees: str, int, bool, float, None, Markup, __html__, |safe, blocks, macros
    "values": "{{ s }}|{{ i }}|{{ b }}|{{ f }}|{{ n }}|{{ m }}|{{ h }}|{{ s|safe }}|{{ -i }}|{{ big }}",
    "blocks": "{% set x %}<{{ s }}>{% endset %}{{ x }}|{{ x|length }}|{% macro q(v) %}[{{ v }}]{% endmacro %}"
              "{{ q(s) }}{{ q(m) }}|{% autoescape false %}{{ s }}{% endautoescape %}|{% autoescape flag %}{{ s }}"
              "{% endautoescape %}|{{ '%s'|format(s) }}|{{ s ~ i }}",
}


class HasHtml:
    def __html__(self):
        return "<em>trusted</em>"

    def __str__(self):
        return "<em>untrusted</em>"


def envs():
    opts = dict(loader=jinja2.DictLoader(SOURCES), autoescape=True)
    return DictFirstEnvironment(**opts), jinja2.Environment(**opts)


@pytest.mark.parametrize("name,ctx", [
    ("row", {"row": {"id": 7, "message": "hi"}}),
    ("missing", {"d": {"a": 1}}),
    ("obj", {"o": 3 + 4j}),
    ("sub", {"d": collections.OrderedDict(id=5)}),  # a dict subclass: stock behaviour
    ("escaped", {"row": {"message": "<script>alert('x')</script>"}}),
    ("loop", {"rows": [{"id": i, "message": f"m{i}"} for i in range(5)]}),
    ("nested", {"a": {"b": {"c": 1, "d": {"e": "<x>"}}, "x": 3 + 4j}}),
    ("in_exprs", {"a": {"b": {"c": 2, "d": {"e": "e"}}}}),
    ("macro", {"a": {"m": {"v": "mv"}, "b": {"c": "cv"}}}),
    ("set_for", {"a": {"b": {"c": "!", "z": 1}}, "rows": [{"id": i, "message": f"m{i}"} for i in range(5)]}),
    ("set_for", {"a": {"b": {"c": "!"}}, "rows": []}),
    ("recursive", {"tree": [{"name": "r", "kids": [{"name": "a", "kids": []}, {"name": "b", "kids": None}]}]}),
    ("filters", {"rows": [{"id": i, "message": f"m{i}"} for i in range(5)]}),
    ("methods", {"a": {"b": {"x": {}, "y": 1}}}),
    ("values", {"s": "<a href='x'>&\"", "i": 42, "b": True, "f": 1.5, "n": None, "m": Markup("<b>ok</b>"),
                "h": HasHtml(), "big": 10 ** 30}),
    ("blocks", {"s": "<i>&", "i": -3, "m": Markup("<b>"), "flag": False}),
    ("blocks", {"s": "<i>&", "i": -3, "m": Markup("<b>"), "flag": True}),
])
def test_same_output_as_stock_jinja2(name, ctx):
    ours, stock = envs()
    assert ours.get_template(name).render(ctx) == stock.get_template(name).render(ctx)


def test_key_named_like_a_dict_method_gives_the_value():
    ours, stock = envs()
    ctx = {"d": {"items": "three items"}}
    assert ours.get_template("method_name").render(ctx) == "three items"
    assert stock.get_template("method_name").render(ctx).startswith("&lt;built-in method items")


def test_missing_key_is_undefined_as_in_stock_jinja2():
    ours, _ = envs()
    assert ours.get_template("missing").render({"d": {}}) == "[]"
    strict = DictFirstEnvironment(loader=jinja2.DictLoader(SOURCES), undefined=jinja2.StrictUndefined)
    with pytest.raises(jinja2.UndefinedError):
        strict.get_template("missing").render({"d": {}})


def test_templates_compile_every_file_once(tmp_path):
    (tmp_path / "a.html").write_text("<p>{{ row.x }}</p>")
    t = Templates(str(tmp_path))
    assert isinstance(t.env, DictFirstEnvironment)
    first = t.get("a.html")
    (tmp_path / "a.html").write_text("changed")  # never re-read: compiled at start-up
    assert t.get("a.html") is first
    r = t.response("a.html", row={"x": "<b>"})
    assert r.body == b"<p>&lt;b&gt;</p>" and r.status == 200


def test_the_output_escaper_is_compiled_in():
    ours, stock = envs()
    assert "escape(" in stock.compile(SOURCES["row"], raw=True)
    assert ours.compile(SOURCES["row"], raw=True).count("environment.escape_output(") == 2


def test_output_escaper_matches_markupsafe():
    from markupsafe import escape

    for v in ["<&>'\"", "", "plain", 0, -7, 10 ** 40, True, None, 2.5, Markup("<b>"), HasHtml(), ["<x>"]]:
        assert str(escape_output(v)) == str(escape(v)), v


def test_the_private_internals_used_are_still_there():
    """templates.py leans on two private names: markupsafe's ``_speedups._escape_inner`` (with a slower
    fallback) and Jinja2's ``CodeGenerator._output_child_pre`` (overridden). Either moving must fail here,
    loudly, rather than silently lose the speed-up or the escaping hook."""
    from jinja2.compiler import CodeGenerator

    from aquilia_app import templates

    assert templates._escape_inner is not None, "markupsafe._speedups._escape_inner is gone: update escape_output"
    assert callable(getattr(CodeGenerator, "_output_child_pre", None)), \
        "jinja2's CodeGenerator._output_child_pre is gone: update _EscapeOutputCodeGenerator"


def test_a_template_given_the_request_builds_urls_and_sees_the_request(tmp_path):
    from aquilia_app import App, Request, StaticFiles
    from aquilia_app.testclient import TestClient

    (tmp_path / "page.html").write_text(
        '<link href="{{ url_for("static", path="css/site.css") }}">'
        '<a href="{{ url_for("item", id=3) }}">{{ request.query.get("who") }}</a>')
    static = tmp_path / "public"
    static.mkdir()
    templates = Templates(str(tmp_path))
    app = App()
    app.mount("/static", StaticFiles(str(static)), name="static")

    @app.get("/items/{id:int}", name="item")
    async def item(id: int):
        return {"id": id}

    @app.get("/page")
    async def page(request: Request):
        return templates.response("page.html", request=request)

    with TestClient(app) as client:
        r = client.get("/page?who=<ada>")
    assert r.headers["content-type"].startswith("text/html")
    assert r.text == ('<link href="http://testserver/static/css/site.css">'
                      '<a href="http://testserver/items/3">&lt;ada&gt;</a>')


def test_a_context_variable_called_name_and_environment_options(tmp_path):
    (tmp_path / "hi.html").write_text("Hi {{ name }} {{ x }}")
    templates = Templates(str(tmp_path))
    assert templates.render("hi.html", name="Ann", x="<b>") == "Hi Ann &lt;b&gt;"
    assert templates.response("hi.html", name="Ann", x=1).body == b"Hi Ann 1"
    # options given to Jinja2's Environment override the defaults instead of a TypeError
    assert Templates(str(tmp_path), autoescape=False).render("hi.html", name="A", x="<b>") == "Hi A <b>"
