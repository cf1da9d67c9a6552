"""Size limits against denial of service, checked without recursion.

Two steps keep the cost at microseconds for normal messages:

1. ``Limits.needed(raw)`` derives, from the raw message length and a count of its
   opening brackets (both C-speed), which limits the message *cannot* break:
   a string of L characters needs at least L+2 bytes, an array of k elements at
   least 2k+1 bytes, and a nesting depth of d at least d opening brackets. When the
   brackets are too many to rule the depth out, the depth is measured on the raw
   text itself (``raw_depth_exceeds``: a handful of C-speed passes over the bytes).
2. Only when a limit could be broken, ``Limits.check(obj, ...)`` walks the parsed
   value level by level with C-level iterators (no recursion: a 100,000-deep nesting
   cannot raise RecursionError; orjson itself refuses nesting deeper than 1024).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import is_

from .errors import LimitExceeded

_chain_all = chain.from_iterable
_compress = compress
_repeat = repeat
_is = is_
_dict_values = dict.values

_OPENS_CAP = 64


def _count_upto(raw, cap: int) -> int:
    """Number of '[' plus '{' in raw, or -1 if over ``cap`` (find is memchr-fast; count is not)."""
    if isinstance(raw, str):
        a, b = "[", "{"
    else:
        a, b = b"[", b"{"
    n = 0
    for ch in (a, b):
        i = raw.find(ch)
        while i >= 0:
            n += 1
            if n > cap:
                return -1
            i = raw.find(ch, i + 1)
    return n


# Written by hand: no library measures JSON nesting without parsing into Python objects.
_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'[]{}"')


def raw_depth_exceeds(raw, max_depth: int) -> bool:
    """True if ``raw``, a valid JSON text (bytes or str), nests containers deeper than ``max_depth``.

    Only C-speed passes over the bytes: escaped backslashes, then escaped quotes, are dropped
    (pairs read left to right, as a JSON parser reads them); everything but brackets and quotes is
    deleted and ``{}`` become ``[]``; what is left between quotes (brackets inside strings) is
    removed. Each ``replace(b"[]", b"")`` then removes every innermost pair, which lowers the
    depth by exactly one, so the text is empty after d passes exactly when the depth is at most d.
    Valid JSON only: the engine calls it on the text it has just parsed.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = raw.translate(_SQUARE, _NOT_STRUCTURE)
    if b'"' in s:
        s = s.replace(b'""', b"")  # empty strings, or two strings' inner quotes: parity kept
        if b'"' in s:
            s = b"".join(s.split(b'"')[::2])
    for _ in range(max_depth):
        if not s:
            return False
        s = s.replace(b"[]", b"")
    return bool(s)


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
    max_batch_length: int = 1000        # requests in one batch (as go-ethereum's default batch limit)
    max_response_bytes: int = 64 << 20  # one response, or a whole batch answer

    def __post_init__(self):
        for name in ("max_message_bytes", "max_depth", "max_array_length", "max_string_length",
                     "max_method_name_length", "max_batch_length", "max_response_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.max_depth > 1000:
            raise ValueError("max_depth must be <= 1000 (the JSON parser stops at 1024)")
        # messages up to this many bytes (or characters) cannot break any size limit (a character
        # is at most 4 UTF-8 bytes; a batch of k requests needs more than 2k bytes)
        object.__setattr__(self, "_small", min(2 * self.max_depth, self.max_string_length + 1,
                                               2 * self.max_array_length + 1, 2 * self.max_batch_length,
                                               self.max_message_bytes // 4))

    # -- step 1: what could the message break at all? -------------------------------
    def needed(self, raw) -> int:
        """Bit set of the checks a message of this raw text could fail (0: none)."""
        return self.analyze(raw)[0]

    def analyze(self, raw) -> tuple[int, int]:
        """(flags, opens): the checks ``raw`` could fail, and its number of opening brackets
        (an upper bound on its containers) or -1 when over ``_OPENS_CAP``. ``raw`` is the valid
        JSON text the message was parsed from (its depth is measured on the text)."""
        n = len(raw)
        if n <= self._small:
            return 0, -1
        flags = 0
        if n > self.max_string_length + 1:
            flags |= CHECK_STRING
        opens = _count_upto(raw, _OPENS_CAP)
        if (opens < 0 or opens > self.max_depth) and raw_depth_exceeds(raw, self.max_depth):
            flags |= CHECK_DEPTH  # the walk finds where, and raises
        if n > 2 * self.max_array_length + 1:
            if opens >= 0:
                flags |= CHECK_LENGTH  # few containers: their lengths are cheap to check
            else:
                # k elements need k-1 commas (commas in strings only add to the count)
                commas = raw.count(",") if isinstance(raw, str) else raw.count(b",")
                if commas >= self.max_array_length:
                    flags |= CHECK_LENGTH
        return flags, opens

    def message_bytes(self, raw) -> int:
        """UTF-8 size of a message given as bytes or str (encodes only when it must)."""
        if isinstance(raw, str):
            n = len(raw)
            if n * 4 <= self.max_message_bytes or n > self.max_message_bytes:
                return n  # cannot change the verdict
            return len(raw.encode("utf-8", "surrogatepass"))
        return len(raw)

    # -- step 2: iterative walk, one nesting level at a time, at C speed ----------------
    def check(self, obj, flags: int = CHECK_DEPTH | CHECK_LENGTH | CHECK_STRING, opens: int = -1) -> None:
        """Raise LimitExceeded if ``obj`` breaks a limit selected by ``flags``.

        Breadth-first by nesting level: each level's containers are split into dicts and
        lists, and the next level is gathered with ``chain``/``compress``/``map`` (no Python
        code per element), so the cost per element is a few C calls and the loop runs once
        per level (at most ``max_depth`` + 1 times). No recursion.
        """
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
        if t is dict:
            dicts, lists = [obj], []
        elif t is list:
            dicts, lists = [], [obj]
        else:
            return
        # ``opens`` (from analyze) bounds the number of containers (brackets in strings only
        # add): once that many were seen, nothing lies deeper and no element needs a look.
        if chk_str:
            opens = -1
        seen = 0
        depth = 1
        while dicts or lists:
            if chk_depth and depth > max_depth:
                raise LimitExceeded("nesting_depth", max_depth)
            if chk_len:
                longest = max(max(map(len, dicts), default=0), max(map(len, lists), default=0))
                if longest > max_len:
                    raise LimitExceeded("array_length", max_len, longest)
            if opens >= 0:
                seen += len(dicts) + len(lists)
                if seen >= opens:
                    return
            if dicts:
                if chk_str:
                    longest = max(map(len, _chain_all(dicts)), default=0)
                    if longest > max_str:
                        raise LimitExceeded("string_length", max_str, longest)
                values = list(_chain_all(map(_dict_values, dicts)))
                if lists:
                    values.extend(_chain_all(lists))
            elif len(lists) == 1:
                values = lists[0]
            else:
                values = list(_chain_all(lists))
            kinds = set(map(type, values))
            if dict not in kinds and list not in kinds and not (chk_str and str in kinds):
                return
            types = list(map(type, values))
            if chk_str and str in kinds:
                longest = max(map(len, _compress(values, map(_is, types, _repeat(str)))))
                if longest > max_str:
                    raise LimitExceeded("string_length", max_str, longest)
            dicts = list(_compress(values, map(_is, types, _repeat(dict)))) if dict in kinds else []
            lists = list(_compress(values, map(_is, types, _repeat(list)))) if list in kinds else []
            depth += 1

    def validate(self, obj, raw=None) -> None:
        """Check ``obj`` (the parsed form of ``raw``); with ``raw``, skip what cannot fail."""
        if raw is None:
            self.check(obj)
        else:
            flags, opens = self.analyze(raw)
            if flags:
                self.check(obj, flags, opens)
