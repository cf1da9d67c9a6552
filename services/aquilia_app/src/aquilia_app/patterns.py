"""Typed path patterns: parsing and castors.

Grammar (a pattern always starts with ``/``)::

    /users/«id:int»                   a typed parameter (guillemets)
    /users/{id:int}                   the same with braces
    /files/{rest:path}                the rest of the path, slashes included (last segment only)
    /users/{id:int|min=1|max=999}     constraints: min, max, re (regex), in (comma-separated one-of)
    /posts[/{page:int}]               an optional part (may nest, e.g. /a[/b[/c]])

Types: ``int``, ``str`` (default), ``float``, ``uuid``, ``slug``, ``path``.
A parameter occupies a whole segment.  ``min``/``max`` bound numbers for ``int``/``float`` and the
length for ``str``/``slug``/``path``.

Every castor is a plain function ``str -> value | NO`` called inline by the matcher (never in a thread
pool).  The only exception :func:`parse` raises is :class:`PatternError` (a ``ValueError``).
"""
from __future__ import annotations

import re
import uuid as _uuid
from typing import Callable, NamedTuple

__all__ = ["PatternError", "NO", "Param", "ParsedPattern", "parse", "TYPE_ORDER"]


class PatternError(ValueError):
    """A route pattern that cannot be compiled (syntax, unknown type, bad constraint)."""


class _No:
    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "NO"


NO = _No()  # castor result meaning "this segment does not match"

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SLUG_RE = re.compile(r"[A-Za-z0-9_-]+\Z")
_FLOAT_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?\Z")

# Specificity: lower is tried first among parameter children of one node.
TYPE_ORDER = {"int": 0, "uuid": 1, "float": 2, "slug": 3, "str": 4, "path": 5}


def _cast_int(s: str):
    if not (s.isdigit() or s[:1] == "-" and len(s) > 1 and s[1:].isdigit()) or not s.isascii():
        return NO
    try:
        return int(s)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits(), 4300 by default)
        return NO


def _cast_float(s: str):
    if _FLOAT_RE.match(s) is None:
        return NO
    v = float(s)
    return v if v - v == 0.0 else NO  # so many digits that it overflowed to +-inf


def _cast_uuid(s: str):
    if len(s) != 36:
        return NO
    try:
        return _uuid.UUID(s)
    except ValueError:
        return NO


def _cast_slug(s: str):
    return s if _SLUG_RE.match(s) is not None else NO


def _cast_str(s: str):
    return s if s else NO


_BASE = {
    "int": _cast_int,
    "float": _cast_float,
    "uuid": _cast_uuid,
    "slug": _cast_slug,
    "str": _cast_str,
    "path": _cast_str,
}


class Param(NamedTuple):
    name: str
    type: str
    constraints: tuple  # sorted ((key, raw value), ...) - part of the node signature
    cast: Callable[[str], object]

    @property
    def signature(self) -> tuple:
        return (self.type, self.constraints)


def _number(kind: str, raw: str, key: str, pattern: str):
    try:
        return int(raw) if kind == "int" else float(raw)
    except ValueError:
        raise PatternError(f"{pattern!r}: constraint {key}={raw!r} is not a valid {kind}") from None


def _make_castor(ptype: str, constraints: dict, pattern: str) -> Callable[[str], object]:
    base = _BASE[ptype]
    checks: list[Callable[[object], bool]] = []
    numeric = ptype in ("int", "float")
    for key, raw in constraints.items():
        if key in ("min", "max"):
            if ptype == "uuid":
                raise PatternError(f"{pattern!r}: constraint {key!r} does not apply to uuid")
            if numeric:
                bound = _number(ptype, raw, key, pattern)
                checks.append((lambda v, b=bound: v >= b) if key == "min" else (lambda v, b=bound: v <= b))
            else:
                try:
                    bound = int(raw)
                except ValueError:
                    raise PatternError(f"{pattern!r}: length bound {key}={raw!r} is not an integer") from None
                checks.append(
                    (lambda v, b=bound: len(v) >= b) if key == "min" else (lambda v, b=bound: len(v) <= b)
                )
        elif key in ("re", "regex"):
            if ptype not in ("str", "slug", "path"):
                raise PatternError(f"{pattern!r}: constraint {key!r} applies to str/slug/path only")
            try:
                rx = re.compile(raw)
            except re.error as e:
                raise PatternError(f"{pattern!r}: invalid regex {raw!r}: {e}") from None
            checks.append(lambda v, m=rx.fullmatch: m(v) is not None)
        elif key == "in":
            options = []
            for item in raw.split(","):
                v = base(item)
                if v is NO:
                    raise PatternError(f"{pattern!r}: one-of value {item!r} is not a valid {ptype}")
                options.append(v)
            allowed = frozenset(options)
            checks.append(lambda v, a=allowed: v in a)
        else:
            raise PatternError(f"{pattern!r}: unknown constraint {key!r} (use min, max, re, in)")
    if not checks:
        return base
    if len(checks) == 1:
        (c1,) = checks

        def cast1(s: str, base=base, c1=c1):
            v = base(s)
            if v is NO or not c1(v):
                return NO
            return v

        return cast1
    tchecks = tuple(checks)

    def castn(s: str, base=base, tchecks=tchecks):
        v = base(s)
        if v is NO:
            return NO
        for c in tchecks:
            if not c(v):
                return NO
        return v

    return castn


class ParsedPattern(NamedTuple):
    pattern: str
    variants: tuple  # tuple of variants; a variant is a tuple of segments (str for static, Param)
    params: tuple  # names of every parameter, in order of appearance


_OPEN = {"{": "}", "«": "»"}


def _parse_param(body: str, pattern: str) -> Param:
    parts = body.split("|")
    head = parts[0]
    name, sep, ptype = head.partition(":")
    name = name.strip()
    ptype = ptype.strip() if sep else "str"
    if not _NAME_RE.match(name):
        raise PatternError(f"{pattern!r}: invalid parameter name {name!r}")
    if ptype not in _BASE:
        raise PatternError(f"{pattern!r}: unknown parameter type {ptype!r} (use {', '.join(_BASE)})")
    constraints: dict[str, str] = {}
    for c in parts[1:]:
        key, eq, val = c.partition("=")
        key = key.strip()
        if not eq or not key or val == "":
            raise PatternError(f"{pattern!r}: constraint {c!r} must look like key=value")
        if key in constraints:
            raise PatternError(f"{pattern!r}: constraint {key!r} given twice")
        constraints[key] = val
    cast = _make_castor(ptype, constraints, pattern)
    return Param(name, ptype, tuple(sorted(constraints.items())), cast)


def _tokenize(pattern: str):
    """Yield ('text', str) | ('param', Param) | ('[', None) | (']', None)."""
    i, n = 0, len(pattern)
    buf: list[str] = []
    while i < n:
        ch = pattern[i]
        if ch in _OPEN:
            close = _OPEN[ch]
            j = pattern.find(close, i + 1)
            if j < 0:
                raise PatternError(f"{pattern!r}: unclosed {ch!r} at offset {i}")
            inner = pattern[i + 1 : j]
            if "{" in inner or "«" in inner:
                raise PatternError(f"{pattern!r}: nested parameter at offset {i}")
            if buf:
                yield ("text", "".join(buf))
                buf = []
            yield ("param", _parse_param(inner, pattern))
            i = j + 1
            continue
        if ch in "}»":
            raise PatternError(f"{pattern!r}: unexpected {ch!r} at offset {i}")
        if ch in "[]":
            if buf:
                yield ("text", "".join(buf))
                buf = []
            yield (ch, None)
            i += 1
            continue
        buf.append(ch)
        i += 1
    if buf:
        yield ("text", "".join(buf))


def _expand(tokens: list, pattern: str) -> list[list]:
    """Expand optional groups into the list of concrete token sequences."""
    pos = 0

    def seq(depth: int) -> list[list]:
        nonlocal pos
        results: list[list] = [[]]
        while pos < len(tokens):
            kind, val = tokens[pos]
            if kind == "]":
                if depth == 0:
                    raise PatternError(f"{pattern!r}: unbalanced ']'")
                pos += 1
                return results
            if kind == "[":
                pos += 1
                inner = seq(depth + 1)
                results = [r + i for r in results for i in ([[]] + inner)]
                if len(results) > 64:
                    raise PatternError(f"{pattern!r}: too many optional combinations")
                continue
            results = [r + [(kind, val)] for r in results]
            pos += 1
        if depth:
            raise PatternError(f"{pattern!r}: unclosed '['")
        return results

    return seq(0)


def _segments(tokens: list, pattern: str) -> tuple:
    """Turn a flat token list of one variant into path segments."""
    # Join text, then split on '/', keeping params as whole segments.
    segs: list = []
    cur: list = []  # parts of the current segment
    for kind, val in tokens:
        if kind == "text":
            pieces = val.split("/")
            cur.append(pieces[0])
            for p in pieces[1:]:
                segs.append(cur)
                cur = [p]
        else:
            cur.append(val)
    segs.append(cur)
    if segs[0] != [""] and segs[0] != []:
        raise PatternError(f"{pattern!r}: a pattern must start with '/'")
    out: list = []
    for parts in segs[1:]:
        params = [p for p in parts if isinstance(p, Param)]
        if params:
            if len(parts) != 1 and any(isinstance(p, str) and p for p in parts) or len(params) > 1:
                raise PatternError(f"{pattern!r}: a parameter must occupy a whole path segment")
            out.append(params[0])
        else:
            out.append("".join(parts))
    for k, s in enumerate(out):
        if isinstance(s, Param) and s.type == "path" and k != len(out) - 1:
            raise PatternError(f"{pattern!r}: a 'path' parameter must be the last segment")
    return tuple(out)


def parse(pattern: str) -> ParsedPattern:
    """Parse a pattern into its concrete variants.  Raises :class:`PatternError` only."""
    if not isinstance(pattern, str):
        raise PatternError(f"pattern must be a str, not {type(pattern).__name__}")
    if not pattern.startswith("/"):
        raise PatternError(f"{pattern!r}: a pattern must start with '/'")
    if any(c in pattern for c in "?#") or any(ord(c) < 32 for c in pattern):
        raise PatternError(f"{pattern!r}: '?', '#' and control characters are not allowed")
    tokens = list(_tokenize(pattern))
    names: list[str] = []
    for kind, val in tokens:
        if kind == "param":
            if val.name in names:
                raise PatternError(f"{pattern!r}: parameter {val.name!r} appears twice")
            names.append(val.name)
    variants = []
    seen = set()
    for toks in _expand(tokens, pattern):
        if toks and toks[0][0] == "text" and not toks[0][1].startswith("/"):
            raise PatternError(f"{pattern!r}: every variant must start with '/'")
        if not toks:
            raise PatternError(f"{pattern!r}: an optional group cannot cover the whole pattern")
        segs = _segments(toks, pattern)
        key = tuple(s if isinstance(s, str) else (s.name,) + s.signature for s in segs)
        if key not in seen:
            seen.add(key)
            variants.append(segs)
    return ParsedPattern(pattern, tuple(variants), tuple(names))
