"""``Response.json()``'s fast path: the native parser (serde_json, correctly rounded floats) where its
result is the one ``json.loads`` gives, and ``json.loads`` for everything else.

The two differ only on inputs the scan below finds, so those go to ``json.loads``:

- integers beyond 64 bits (20 digits, or "-" and 19): serde_json makes them floats;
- ``-0``: serde_json makes it the float -0.0, json the int 0;
- a UTF-8 byte order mark: serde_json skips it, json refuses it (when the text is decoded as UTF-8).

Everything serde_json refuses (NaN, Infinity, 1e400, lone surrogates, invalid UTF-8, nesting deeper
than 128) is retried with ``json.loads``, which then gives its value or its error (msg, doc, pos).
The scan may flag a document that does not need it (a 20-digit string, "-0" in a string): that only
costs the slower parse."""

from __future__ import annotations

import re
from typing import Any, Callable

from . import exceptions as exc

# A run of 20 characters from "-0123456789" covers five consecutive positions of every fourth byte, so
# bytes taken at a stride of 4 show "00000" once digits and "-" are mapped to "0": a cheap first look (a
# slice and a translate of a quarter of the body). Only runs of 17 or more can show it, so dates, times,
# timestamps in milliseconds and ordinary numbers pass; a candidate is then checked where it is.
_STRIDE = 4
_SAMPLE_RUN = b"0" * 5
_DIGIT_OR_MINUS = bytes(ord("0") if c in b"-0123456789" else ord(" ") for c in range(256))
_LONG_INTEGER = re.compile(rb"[0-9]{20}|-[0-9]{19}")
_MAX_WINDOWS = 32  # candidates looked at one by one; past this, one pass over the whole body
_RUN = b"0" * 20
_MINUS_ZERO = re.compile(rb"-0(?![0-9.eE])")
_BOM = b"\xef\xbb\xbf"


def _has_long_integer(data: bytes) -> bool:
    sample = data[::_STRIDE].translate(_DIGIT_OR_MINUS)
    k = sample.find(_SAMPLE_RUN)
    for _ in range(_MAX_WINDOWS):
        if k < 0:
            return False
        # samples k..k+4 are data[4k], ..., data[4k+16]: a run of 20 through them lies in this window
        at = k * _STRIDE
        if _LONG_INTEGER.search(data, max(at - 20, 0), at + 36):
            return True
        k = sample.find(_SAMPLE_RUN, k + 1)
    # many candidates (long numbers everywhere): one translate of the whole body finds every run of 20
    shape = data.translate(_DIGIT_OR_MINUS)
    at = shape.find(_RUN)
    for _ in range(_MAX_WINDOWS):
        if at < 0:
            return False
        if _LONG_INTEGER.search(data, at, at + 21):
            return True
        at = shape.find(_RUN, at + 20)
    return True  # still undecided: json.loads is right in any case


def native_exact(data: bytes) -> bool:
    """Whether the native parser's value for ``data`` is sure to be json.loads' (or it fails)."""
    if data[:3] == _BOM:
        return False
    if b"-" in data and _MINUS_ZERO.search(data):  # a one-byte search (memchr) first
        return False
    return not _has_long_integer(data)


def loads_like_json(native: Any, data: bytes, fallback: Callable[[], Any]) -> Any:
    """The value of the UTF-8 JSON ``data`` (the body of ``native``), as json.loads gives it."""
    if native_exact(data):
        try:
            return native.json()
        except exc.JSONDecodeError:
            pass  # json.loads decides: it accepts more, and its error is the one to raise
    return fallback()
