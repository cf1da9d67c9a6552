"""Jinja2 templates, compiled once: every template is loaded (and so compiled) at start-up, the
environment never re-checks the files, and rendering is a plain call."""
from __future__ import annotations

from typing import Any

import jinja2

from .responses import CT_HTML, Response

__all__ = ["Templates"]


class Templates:
    def __init__(self, directory: str, *, preload: bool = True, **env_options: Any):
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(directory),
            autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
            auto_reload=False,
            cache_size=-1,
            **env_options,
        )
        self._compiled: dict[str, jinja2.Template] = {}
        if preload:
            for name in self.env.list_templates():
                self._compiled[name] = self.env.get_template(name)

    def get(self, name: str) -> jinja2.Template:
        t = self._compiled.get(name)
        if t is None:
            t = self._compiled[name] = self.env.get_template(name)
        return t

    def render(self, name: str, **context: Any) -> str:
        return self.get(name).render(context)

    def response(self, name: str, status: int = 200, headers=None, **context: Any) -> Response:
        return Response(self.get(name).render(context).encode(), status, headers, CT_HTML)
