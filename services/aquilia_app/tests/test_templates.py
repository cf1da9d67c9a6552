"""Templates: compiled once, and ``obj.name`` on a plain dict looks the key up first (no exception per
lookup) while everything else renders exactly as stock Jinja2 renders it."""
import collections

import jinja2
import pytest

from aquilia_app.templates import DictFirstEnvironment, Templates

SOURCES = {
    "row": "{{ row.id }}|{{ row.message }}",
    "method_name": "{{ d.items }}",
    "missing": "[{{ d.nope }}]",
    "obj": "{{ o.real }}|{{ o.imag }}",
    "sub": "{{ d.id }}|{{ d.keys is callable }}",
    "escaped": "{{ row.message }}",
    "loop": "{% for r in rows %}{{ r.id }}:{{ r.message }};{% endfor %}",
}


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
