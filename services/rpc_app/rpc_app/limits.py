"""Size limits against denial of service, checked without recursion.

Two steps keep the cost at microseconds for normal messages:

1. ``Limits.needed(raw)`` derives, from the raw message length and a count of its
   opening brackets (both C-speed), which limits the message *cannot* break:
   a string of L characters needs at least L+2 bytes, an array of k elements at
   least 2k+1 bytes, and a nesting depth of d at least d opening brackets.
2. Only when a limit could be broken, ``Limits.check(obj, ...)`` walks the parsed
   value with an explicit stack (no recursion: a 100,000-deep nesting cannot raise
   RecursionError; orjson itself refuses nesting deeper than 1024).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LimitExceeded

_SCALARS = frozenset((int, float, bool, type(None)))
_SCALARS_AND_STR = _SCALARS | {str}

CHECK_DEPTH = 1
CHECK_LENGTH = 2
CHECK_STRING = 4


@dataclass(frozen=True)
class Limits:
    """All limits are inclusive maxima. Depth counts containers: ``{"params":[1]}`` has depth 2."""

    max_message_bytes: int = 1 << 20
    max_depth: int = 32
    max_array_length: int = 10_000      # elements of an array, members of an object
    max_string_length: int = 1 << 18    # characters of any string (keys included)
    max_method_name_length: int = 128

    def __post_init__(self):
        for name in ("max_message_bytes", "max_depth", "max_array_length",
                     "max_string_length", "max_method_name_length"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.max_depth > 1000:
            raise ValueError("max_depth must be <= 1000 (the JSON parser stops at 1024)")

    # -- step 1: what could the message break at all? -------------------------------
    def needed(self, raw) -> int:
        """Bit set of the checks a message of this raw text could fail (0: none)."""
        n = len(raw)
        flags = 0
        if n > self.max_string_length + 1:
            flags |= CHECK_STRING
        if n > 2 * self.max_array_length + 1:
            flags |= CHECK_LENGTH
        if n > 2 * self.max_depth:
            if isinstance(raw, str):
                opens = raw.count("[") + raw.count("{")
            else:
                opens = raw.count(b"[") + raw.count(b"{")
            if opens > self.max_depth:
                flags |= CHECK_DEPTH
        return flags

    def message_bytes(self, raw) -> int:
        """UTF-8 size of a message given as bytes or str (encodes only when it must)."""
        if isinstance(raw, str):
            n = len(raw)
            if n * 4 <= self.max_message_bytes or n > self.max_message_bytes:
                return n  # cannot change the verdict
            return len(raw.encode("utf-8", "surrogatepass"))
        return len(raw)

    # -- step 2: iterative walk ------------------------------------------------------------
    def check(self, obj, flags: int = CHECK_DEPTH | CHECK_LENGTH | CHECK_STRING) -> None:
        """Raise LimitExceeded if ``obj`` breaks a limit selected by ``flags``."""
        if not flags:
            return
        max_depth = self.max_depth
        max_len = self.max_array_length
        max_str = self.max_string_length
        chk_len = flags & CHECK_LENGTH
        chk_str = flags & CHECK_STRING
        chk_depth = flags & CHECK_DEPTH
        t = type(obj)
        if t is str:
            if chk_str and len(obj) > max_str:
                raise LimitExceeded("string_length", max_str, len(obj))
            return
        if t is not list and t is not dict:
            return
        stack = [(obj, 1)]
        pop = stack.pop
        push = stack.append
        while stack:
            node, depth = pop()
            if chk_depth and depth > max_depth:
                raise LimitExceeded("nesting_depth", max_depth)
            if chk_len and len(node) > max_len:
                raise LimitExceeded("array_length", max_len, len(node))
            if type(node) is dict:
                if chk_str:
                    for k in node:
                        if len(k) > max_str:
                            raise LimitExceeded("string_length", max_str, len(k))
                values = node.values()
            else:
                values = node
            # Fast path, C-speed: a container of scalars (and strings) needs no walk.
            kinds = set(map(type, values))
            if kinds <= _SCALARS:
                continue
            if kinds <= _SCALARS_AND_STR:
                if chk_str:
                    longest = max(len(v) for v in values if type(v) is str)
                    if longest > max_str:
                        raise LimitExceeded("string_length", max_str, longest)
                continue
            child_depth = depth + 1
            for v in values:
                tv = type(v)
                if tv is list or tv is dict:
                    push((v, child_depth))
                elif tv is str and chk_str and len(v) > max_str:
                    raise LimitExceeded("string_length", max_str, len(v))

    def validate(self, obj, raw=None) -> None:
        """Check ``obj`` (the parsed form of ``raw``); with ``raw``, skip what cannot fail."""
        self.check(obj, self.needed(raw) if raw is not None else CHECK_DEPTH | CHECK_LENGTH | CHECK_STRING)
