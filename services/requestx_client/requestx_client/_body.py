"""Encoding of what a request carries: query parameters, form and multipart bodies, JSON bodies."""

from __future__ import annotations

import json as _stdjson
import mimetypes
import os
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from . import exceptions as exc


def _std_dumps(obj: Any) -> bytes:
    try:
        return _stdjson.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise exc.InvalidJSONError(str(e)) from e


try:  # orjson serialises json= bodies faster when present
    import orjson as _orjson

    def _dumps(obj: Any) -> bytes:
        try:
            return _orjson.dumps(obj)
        except TypeError:
            # what orjson refuses but json accepts (integers beyond 64 bits, non-str keys) goes to json
            return _std_dumps(obj)
except ImportError:  # pragma: no cover - orjson is optional
    _dumps = _std_dumps


def _pairs(data: Any) -> list[tuple[Any, Any]]:
    if data is None:
        return []
    if isinstance(data, Mapping):
        items: Iterable[Any] = data.items()
    else:
        items = data
    out: list[tuple[Any, Any]] = []
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            out.extend((k, x) for x in v if x is not None)
        else:
            out.append((k, v))
    return out


def _to_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode("utf-8")


def _quote_field(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def encode_multipart(data: Any, files: Any) -> tuple[bytes, str]:
    """multipart/form-data body for ``files=`` (plus the ``data=`` fields); returns (body, content type)."""
    boundary = uuid.uuid4().hex
    sep = b"--" + boundary.encode("ascii") + b"\r\n"
    out: list[bytes] = []
    if data is not None and not isinstance(data, (str, bytes)):
        for name, value in _pairs(data):
            out.append(sep)
            out.append(f'Content-Disposition: form-data; name="{_quote_field(str(name))}"\r\n\r\n'.encode())
            out.append(_to_bytes(value))
            out.append(b"\r\n")
    for name, spec in (files.items() if isinstance(files, Mapping) else files):
        ctype = None
        extra: Mapping[str, str] = {}
        if isinstance(spec, (tuple, list)):
            if len(spec) == 2:
                fname, fobj = spec
            elif len(spec) == 3:
                fname, fobj, ctype = spec
            elif len(spec) == 4:
                fname, fobj, ctype, extra = spec
            else:
                raise ValueError("a files= entry must be a file or a (filename, file[, content_type[, headers]]) tuple")
        else:
            fobj = spec
            fname = os.path.basename(getattr(spec, "name", "") or "") or str(name)
        if fobj is None:
            continue
        if isinstance(fobj, (bytes, bytearray, memoryview, str)):
            content = _to_bytes(fobj)
        elif hasattr(fobj, "read"):
            content = _to_bytes(fobj.read())
        else:
            raise ValueError(f"cannot read the content of files[{name!r}]")
        disp = f'Content-Disposition: form-data; name="{_quote_field(str(name))}"'
        if fname is not None:
            disp += f'; filename="{_quote_field(str(fname))}"'
        out.append(sep)
        out.append(disp.encode() + b"\r\n")
        if ctype:
            out.append(f"Content-Type: {ctype}\r\n".encode())
        for hk, hv in extra.items():
            out.append(f"{hk}: {hv}\r\n".encode())
        out.append(b"\r\n")
        out.append(content)
        out.append(b"\r\n")
    out.append(b"--" + boundary.encode("ascii") + b"--\r\n")
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def guess_type(name: str) -> str | None:
    return mimetypes.guess_type(name)[0]


def encode_body(data: Any, files: Any, json: Any) -> tuple[bytes | None, str | None]:
    """(body, content type) for data=/json=/files= as requests does."""
    if files:
        return encode_multipart(data, files)
    if data is not None and not (isinstance(data, (dict, list, tuple)) and not data):
        if isinstance(data, bytes):
            return data, None
        if isinstance(data, str):
            return data.encode("utf-8"), None
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data), None
        if hasattr(data, "read"):
            return _to_bytes(data.read()), None
        if isinstance(data, (Mapping, list, tuple)):
            return urlencode([(k, v) for k, v in _pairs(data)], doseq=False).encode("ascii"), \
                "application/x-www-form-urlencoded"
        if isinstance(data, Iterable):  # generator of chunks: sent as one body
            return b"".join(_to_bytes(c) for c in data), None
        raise ValueError(f"cannot send data of type {type(data).__name__}")
    if json is not None:
        return _dumps(json), "application/json"
    return None, None


def add_params(url: str, *param_sets: Any) -> str:
    extra: list[str] = []
    for params in param_sets:
        if not params:
            continue
        if isinstance(params, (str, bytes)):
            extra.append(params.decode("ascii") if isinstance(params, bytes) else params)
        else:
            extra.append(urlencode(_pairs(params), doseq=False))
    extra = [e for e in extra if e]
    if not extra:
        return url
    parts = urlsplit(url)
    query = "&".join(([parts.query] if parts.query else []) + extra)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


