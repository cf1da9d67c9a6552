"""The payloads the aquilia_app peers serve: byte-for-byte what aquilia_app's /ping, /json, /json-large and
/html send (the /html peers render aquilia_app's own html/page.html with HTML_ROWS).

``render_html()`` renders that template with a Jinja2 environment set up like aquilia_app's (autoescape,
no reload), compiled once at import; the template is found through the installed ``aquilia_app`` package
(located, not imported, so importing this module never builds the app).
"""
import importlib.util
import os

JSON_SMALL = {
    "message": "Hello, World!",
    "service": "aquilia_app",
    "version": 1,
    "ok": True,
    "ratio": 0.75,
    "tags": ["fast", "async", "typed", "asgi"],
    "numbers": [1, 2, 3, 4, 5, 6, 7, 8],
    "nested": {"id": 42, "name": "answer", "active": False, "score": 99.5},
}
PONG = b"pong"
JSON_LARGE = [{"id": i, "name": f"item-{i}", "value": (i % 10) * 0.5} for i in range(1000)]
HTML_ROWS = [{"id": i, "message": m} for i, m in enumerate(
    ["fortune favours the bold", "<script>alert('escaped')</script>", "a penny saved", "měřeno, ne odhadnuto",
     "keep it simple", "measure twice", "cut once", "premature optimization", "the map is not the territory",
     "less is more", "make it work, make it right, make it fast", "ship it"], start=1)]
HTML_CONTEXT = {"title": "aquilia_app", "service": "aquilia_app", "rows": HTML_ROWS}



def _compile_page():
    """aquilia_app's page.html, compiled once at import; None where aquilia_app is not installed (perfkit's own
    tests run raw_asgi.py without it: then only /html is missing, and it answers 500 saying why)."""
    spec = importlib.util.find_spec("aquilia_app")
    if spec is None or not spec.submodule_search_locations:
        return None
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(spec.submodule_search_locations[0], "html")),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             auto_reload=False)
    return env.get_template("page.html")


PAGE = _compile_page()


def render_html() -> str:
    if PAGE is None:
        raise RuntimeError("/html needs aquilia_app's html/page.html: the aquilia_app package is not importable")
    return PAGE.render(HTML_CONTEXT)
