"""Encoding of what a request carries, as requests encodes it: query parameters, form bodies (a str),
multipart bodies and JSON bodies (bytes), and the length of any body (``super_len``)."""

from __future__ import annotations

import io
import json as _stdjson
import mimetypes
import os
import uuid
import warnings
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from . import exceptions as exc


def _std_dumps(obj: Any) -> bytes:
    try:
        return _stdjson.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise exc.InvalidJSONError(e) from e


def _none(o: Any) -> None:
    return None


def _check_finite(obj: Any) -> None:
    """InvalidJSONError if ``obj`` holds NaN or an infinity, which JSON cannot carry (types json does
    not know, and orjson does, count as null here: only the numbers are in question)."""
    try:
        _stdjson.dumps(obj, allow_nan=False, default=_none)
    except ValueError as e:
        raise exc.InvalidJSONError(e) from e


try:  # orjson serialises json= bodies faster when present
    import orjson as _orjson

    def _dumps(obj: Any) -> bytes:
        try:
            out = _orjson.dumps(obj)
        except TypeError:
            # what orjson refuses but json accepts (integers beyond 64 bits, non-str keys) goes to json
            return _std_dumps(obj)
        if b"null" in out:  # orjson writes NaN and infinities as null, where requests refuses them
            _check_finite(obj)
        return out
except ImportError:  # pragma: no cover - orjson is optional
    _dumps = _std_dumps


def _key_values(data: Any) -> Any:
    """requests' ``to_key_val_list``: (key, value) pairs of a mapping, or the pairs of a list."""
    if isinstance(data, (str, bytes, bool, int)):
        raise ValueError("cannot encode objects that are not 2-tuples")
    if isinstance(data, Mapping):
        return data.items()
    return list(data)


def _values(v: Any) -> Any:
    """The values of one form field: a str/bytes or other scalar is one, any other iterable several."""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        return (v,)
    return v


def _pairs(data: Any) -> list[tuple[Any, Any]]:
    """The (key, value) pairs ``data`` stands for, a field's several values each in a pair of its own,
    None values left out."""
    if data is None:
        return []
    return [(k, v) for k, vs in _key_values(data) for v in _values(vs) if v is not None]


def encode_params(data: Any) -> Any:
    """requests' ``_encode_params``: str/bytes and file-like objects as they are, pairs url-encoded."""
    if isinstance(data, (str, bytes)) or hasattr(data, "read"):
        return data
    if hasattr(data, "__iter__"):
        return urlencode(_pairs(data))
    return data


def _to_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode("utf-8")


def _text(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _quote_field(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def guess_filename(obj: Any) -> str | None:
    """The base name of a file object's ``name``, unless it is not a str/bytes or is like "<stdin>"."""
    name = getattr(obj, "name", None)
    if name and isinstance(name, (str, bytes)) and name[0:1] not in ("<", b"<") and name[-1:] not in (">", b">"):
        return os.path.basename(name)  # type: ignore[no-any-return]
    return None


def encode_multipart(data: Any, files: Any) -> tuple[bytes, str]:
    """multipart/form-data body for ``files=`` (after the ``data=`` fields); returns (body, content type)."""
    if not files:
        raise ValueError("Files must be provided.")
    if isinstance(data, (str, bytes)):
        raise ValueError("Data must not be a string.")
    boundary = uuid.uuid4().hex
    sep = b"--" + boundary.encode("ascii") + b"\r\n"
    out: list[bytes] = []
    for name, value in _pairs(data or {}):
        out.append(sep)
        out.append(f'Content-Disposition: form-data; name="{_quote_field(_text(name))}"\r\n\r\n'.encode())
        out.append(_to_bytes(value))
        out.append(b"\r\n")
    for name, spec in _key_values(files):
        ctype = None
        extra: Mapping[str, str] = {}
        if isinstance(spec, (tuple, list)):
            if len(spec) == 2:
                fname, fobj = spec
            elif len(spec) == 3:
                fname, fobj, ctype = spec
            else:
                fname, fobj, ctype, extra = spec
        else:
            fobj = spec
            fname = guess_filename(spec) or name
        if fobj is None:
            continue
        if hasattr(fobj, "read") and not isinstance(fobj, (str, bytes, bytearray)):
            content = _to_bytes(fobj.read())
        else:
            content = _to_bytes(fobj)  # str, bytes, or anything else as its str (as urllib3 does)
        disp = f'Content-Disposition: form-data; name="{_quote_field(_text(name))}"'
        if fname is not None:
            disp += f'; filename="{_quote_field(_text(fname))}"'
        out.append(sep)
        out.append(disp.encode() + b"\r\n")
        if ctype:
            out.append(f"Content-Type: {ctype}\r\n".encode())
        for hk, hv in (extra or {}).items():
            out.append(f"{hk}: {hv}\r\n".encode())
        out.append(b"\r\n")
        out.append(content)
        out.append(b"\r\n")
    out.append(b"--" + boundary.encode("ascii") + b"--\r\n")
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def guess_type(name: str) -> str | None:
    return mimetypes.guess_type(name)[0]


def is_stream(data: Any) -> bool:
    """Whether requests streams ``data`` as it is (a file, generator or other iterable that is not
    str/bytes, a list, a tuple or a mapping) rather than encoding it."""
    if data.__class__ in (dict, str, bytes, list, tuple):
        return False
    return hasattr(data, "__iter__") and not isinstance(data, (str, bytes, list, tuple, Mapping))


def super_len(o: Any) -> int:
    """How many bytes are left to send of ``o``, as requests counts them (0 when it cannot tell: the
    body then goes with Transfer-Encoding: chunked)."""
    if o.__class__ is bytes:
        return len(o)
    if isinstance(o, str):  # sent as UTF-8
        return len(o) if o.isascii() else len(o.encode("utf-8"))
    total = None
    position = 0
    if hasattr(o, "__len__"):
        total = len(o)
    elif hasattr(o, "len"):
        total = o.len
    elif hasattr(o, "fileno"):
        try:
            fileno = o.fileno()
        except (io.UnsupportedOperation, AttributeError):
            pass  # AttributeError: Tarfile.extractfile() objects, as requests notes
        else:
            total = os.fstat(fileno).st_size
            if "b" not in getattr(o, "mode", "b"):
                warnings.warn("Requests has determined the content-length for this request using the binary "
                              "size of the file: however, the file has been opened in text mode (i.e. without "
                              "the 'b' flag in the mode). This may lead to an incorrect content-length. In "
                              "Requests 3.0, support will be removed for files in text mode.",
                              exc.FileModeWarning)
    if hasattr(o, "tell"):
        try:
            position = o.tell()
        except OSError:
            # a special file (stdin): its length is unknown, and it is chunked
            if total is not None:
                position = total
        else:
            if hasattr(o, "seek") and total is None:
                # BytesIO and alike: seek to the end for the length, then back
                try:
                    o.seek(0, 2)
                    total = o.tell()
                    o.seek(position or 0)
                except OSError:
                    total = 0
    if total is None:
        total = 0
    return max(0, total - position)


# bytes read from a file body at a time while it is sent
_PIECE = 64 * 1024


def _piece_bytes(data: Any) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def body_to_send(body: Any) -> Any:
    """A prepared body that is not bytes already, as the core takes it: a str as UTF-8 bytes; a file or
    other iterable as a function returning its next piece (None at the end), which the core calls while
    it sends, so the body is never held in memory whole (it frames the pieces with the request's
    Content-Length, or as chunks)."""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if hasattr(body, "read"):
        def read_piece() -> bytes | None:
            data = body.read(_PIECE)
            return _piece_bytes(data) if data else None
        return read_piece
    pieces = iter(body)

    def next_piece() -> bytes | None:
        for piece in pieces:
            if piece:
                return _piece_bytes(piece)
        return None
    return next_piece


def add_params(url: str, *param_sets: Any) -> str:
    """``url`` with each of ``param_sets`` (a mapping or pairs, url-encoded; or a ready str/bytes query)
    added to its query, before its fragment."""
    extra: list[str] = []
    for params in param_sets:
        if not params:
            continue
        if isinstance(params, (str, bytes)):
            extra.append(params.decode("ascii") if isinstance(params, bytes) else params)
        else:
            extra.append(urlencode(_pairs(params)))
    extra = [e for e in extra if e]
    if not extra:
        return url
    base, hashmark, fragment = url.partition("#")
    base, _, query = base.partition("?")
    query = "&".join(([query] if query else []) + extra)
    return base + "?" + query + hashmark + fragment
