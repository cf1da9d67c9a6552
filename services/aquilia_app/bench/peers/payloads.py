"""The reference payloads, byte-identical to aquilia_app.app's (bench_e2e checks the sizes match)."""
import os

import jinja2

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
JSON_LARGE = [{"id": i, "name": f"item-{i}", "value": (i % 10) * 0.5} for i in range(1000)]
HTML_ROWS = [{"id": i, "message": m} for i, m in enumerate(
    ["fortune favours the bold", "<script>alert('escaped')</script>", "a penny saved", "měřeno, ne odhadnuto",
     "keep it simple", "measure twice", "cut once", "premature optimization", "the map is not the territory",
     "less is more", "make it work, make it right, make it fast", "ship it"], start=1)]

_HTML_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "src", "aquilia_app", "html")
_env = jinja2.Environment(loader=jinja2.FileSystemLoader(_HTML_DIR), autoescape=True, auto_reload=False)
PAGE = _env.get_template("page.html")


def render_html() -> str:
    return PAGE.render(title="aquilia_app", service="aquilia_app", rows=HTML_ROWS)


def port_arg() -> tuple[str, int]:
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    return a.host, a.port
