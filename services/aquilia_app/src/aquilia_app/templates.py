"""Jinja2 templates, compiled once: every template is loaded (and so compiled) at start-up, the
environment never re-checks the files, and rendering is a plain call.

``DictFirstEnvironment`` renders the reference app's /html page in ~19 us where stock Jinja2 takes ~54 us
(``bench_micro``'s template row), with two changes:

* ``{{ row.id }}`` on a plain dict looks the key up first. Stock Jinja2 tries the attribute first, and a
  dict has no attribute ``id``: every such lookup raised and caught an AttributeError (54 -> 33 us). The
  one visible difference: a key named like a dict method (``items``, ``keys``, ``get``...) gives the
  value, where stock Jinja2 gives the method; a missing key behaves as in stock Jinja2.
* The generated code escapes an autoescaped output value that is a ``str`` or an ``int`` to a plain
  ``str`` with markupsafe's C escaper, without building a ``Markup`` per value (``escape_output``;
  33 -> 19 us); everything else goes through ``markupsafe.escape``. The text is the same (tests compare
  with stock Jinja2).

(Compiling the dict-first lookup inline, instead of calling ``getattr``, was measured too: no gain.)
"""
from __future__ import annotations

from typing import Any

import jinja2
from jinja2.compiler import CodeGenerator
from markupsafe import escape

from .responses import CT_HTML, Response

__all__ = ["Templates", "DictFirstEnvironment"]


try:  # markupsafe's C escaper, without the Markup wrapper (private name: fall back to escape() if it moves)
    from markupsafe._speedups import _escape_inner
except ImportError:  # pragma: no cover
    _escape_inner = None


def escape_output(value: Any) -> Any:
    """``escape`` for what an autoescaped template outputs: the same text, as a plain ``str`` for the
    common cases (a ``str``, an ``int``) instead of a ``Markup`` built per value.  The pieces are joined
    into one string anyway (and wrapped in ``Markup`` where Jinja2 needs markup: macros, ``set`` blocks).
    Everything else - ``Markup``, objects with ``__html__`` - goes through markupsafe's ``escape``."""
    cls = value.__class__
    if cls is str and _escape_inner is not None:
        return _escape_inner(value)
    if cls is int:
        return str(value)  # digits and a sign: nothing to escape
    return escape(value)


class _EscapeOutputCodeGenerator(CodeGenerator):
    """Generates ``environment.escape_output(value)`` where stock Jinja2 generates ``escape(value)``."""

    def _output_child_pre(self, node, frame, finalize) -> None:
        if frame.eval_ctx.autoescape and not frame.eval_ctx.volatile:
            self.write("environment.escape_output(")  # ``environment`` is a local of the render function
            if finalize.src is not None:
                self.write(finalize.src)
            return
        super()._output_child_pre(node, frame, finalize)


class DictFirstEnvironment(jinja2.Environment):
    """A Jinja2 environment whose ``obj.name`` tries ``obj[name]`` first when ``obj`` is a plain dict, and
    whose templates escape their output with ``escape_output``."""

    code_generator_class = _EscapeOutputCodeGenerator
    escape_output = staticmethod(escape_output)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if obj.__class__ is dict:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return jinja2.Environment.getattr(self, obj, attribute)


class Templates:
    def __init__(self, directory: str, *, preload: bool = True, **env_options: Any):
        env_options.setdefault("autoescape", jinja2.select_autoescape(default=True, default_for_string=True))
        env_options.setdefault("auto_reload", False)
        env_options.setdefault("cache_size", -1)
        self.env = DictFirstEnvironment(loader=jinja2.FileSystemLoader(directory), **env_options)
        self._compiled: dict[str, jinja2.Template] = {}
        if preload:
            for name in self.env.list_templates():
                self._compiled[name] = self.env.get_template(name)

    def get(self, name: str) -> jinja2.Template:
        t = self._compiled.get(name)
        if t is None:
            t = self._compiled[name] = self.env.get_template(name)
        return t

    def render(self, name: str, /, request=None, **context: Any) -> str:
        """``name`` rendered with ``context``; with the ``request``, the template also sees ``request``
        and ``url_for(name, **params)`` (the absolute URL of a route, as in Starlette's templates)."""
        if request is not None:
            context["request"] = request
            context.setdefault("url_for", request.url_for)
        return self.get(name).render(context)

    def response(self, name: str, /, status: int = 200, headers=None, request=None, **context: Any) -> Response:
        return Response(self.render(name, request, **context).encode(), status, headers, CT_HTML)
