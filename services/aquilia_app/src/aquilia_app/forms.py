"""HTML forms: ``application/x-www-form-urlencoded`` and ``multipart/form-data`` request bodies.

``await request.form()`` returns a ``FormData``: text fields as ``str``, file parts as ``UploadFile``.
The body is parsed while it streams in (python-multipart's push parsers are fed each chunk as the
server delivers it); it is never held whole in memory.  A file part goes to a
``SpooledTemporaryFile`` that moves to disk once it outgrows ``FormLimits.spool_threshold``; file
I/O on disk runs in a worker thread (``asyncio.to_thread``), in memory it runs inline.  The files are
closed by ``await request.close()`` when the request ends.

Limits (``FormLimits``: per call, ``request.form(limits)``, or app-wide via ``app.form_limits``):

============================  ============  =====================================================
limit                         default       exceeded ->
============================  ============  =====================================================
``max_parts``                 1000          413 (fields + files, urlencoded pairs included)
``max_fields``                = parts       413 (text fields, urlencoded pairs included)
``max_files``                 = parts       413 (file parts)
``max_field_size``            1 MiB         413 (a text field's bytes; urlencoded: name + value)
``max_file_size``             = total       413 (one file's bytes)
``max_total_size``            app max body  413 (the whole body; ``None``: the request's max_body)
``max_part_header_bytes``     8 KiB         413 (one part's header lines together)
``spool_threshold``           1 MiB         a file above it is written to a temporary file
============================  ============  =====================================================

``max_total_size`` defaults to the app's ``max_body_size`` (1 MiB unless set) so one knob bounds every
body; an app taking larger uploads raises it (or ``max_body_size``).  A body that is not a valid form
(no boundary, truncated, garbage, a part without a name, text that is not UTF-8) is a 400; another
content type (or a body without one) is a 415; a request with neither a body nor a Content-Type is an
empty form; a body slower than the app's ``body_timeout`` is a 408.

A file part's ``filename`` is the name the client sent, decoded (UTF-8; an RFC 8187 ``filename*``,
which some clients send although RFC 7578 4.2 tells them not to, wins over ``filename``), reduced to
its last path segment: a path (``../../x``, ``C:\\dir\\x``, a folder upload's ``dir/x``) never reaches
code that joins the name to a directory.  The part's raw headers stay in ``UploadFile.headers``.
"""
from __future__ import annotations

import asyncio
import re
import tempfile
from dataclasses import dataclass
from typing import Iterator
from urllib.parse import unquote_to_bytes

from python_multipart import MultipartParser, QuerystringParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartState, parse_options_header

from .deadlines import deadline
from .exceptions import BadRequest, PayloadTooLarge, RequestTimeout, UnsupportedMediaType
from .requests import Headers

__all__ = ["FormData", "FormLimits", "UploadFile", "read_form"]

MIB = 1 << 20
_URLENCODED = b"application/x-www-form-urlencoded"
_MULTIPART = b"multipart/form-data"


@dataclass(frozen=True, slots=True)
class FormLimits:
    max_parts: int = 1000
    max_fields: int | None = None  # None: up to max_parts
    max_files: int | None = None  # None: up to max_parts
    max_field_size: int = MIB
    max_file_size: int | None = None  # None: up to the total size
    max_total_size: int | None = None  # None: the request's max_body (the app's max_body_size)
    max_part_header_bytes: int = 8192
    spool_threshold: int = MIB


DEFAULT_LIMITS = FormLimits()


class UploadFile:
    """One uploaded file: its part's ``filename``, ``content_type``, ``headers``, ``size`` and the
    content in ``file`` (a ``SpooledTemporaryFile``, positioned at the start once the form is read);
    ``await read(size)``, ``write(data)``, ``seek(offset)`` and ``close()`` as Starlette's ``UploadFile``."""

    __slots__ = ("filename", "content_type", "headers", "size", "file", "_on_disk", "_threshold")

    def __init__(self, filename: str, content_type: str, headers: Headers, spool_threshold: int = MIB):
        self.filename = filename
        self.content_type = content_type
        self.headers = headers
        self.size = 0
        self.file = tempfile.SpooledTemporaryFile(max_size=spool_threshold)
        self._threshold = spool_threshold
        self._on_disk = False  # tracked here: SpooledTemporaryFile exposes it only privately

    @property
    def on_disk(self) -> bool:
        return self._on_disk

    @property
    def closed(self) -> bool:
        return self.file.closed

    async def _append(self, data) -> None:
        """Add a piece of the part; the move to disk and disk writes happen off the event loop."""
        if not self._on_disk and self.size + len(data) > self._threshold:
            await asyncio.to_thread(self.file.rollover)
            self._on_disk = True
        if self._on_disk:
            await asyncio.to_thread(self.file.write, data)
        else:
            self.file.write(data)
        self.size += len(data)

    async def read(self, size: int = -1) -> bytes:
        if self._on_disk:
            return await asyncio.to_thread(self.file.read, size)
        return self.file.read(size)

    async def write(self, data: bytes) -> None:
        """Write ``data`` at the current position (Starlette's ``UploadFile.write``): ``size`` grows, and
        the file moves to disk when it outgrows the spool threshold."""
        await self._append(data)

    async def seek(self, offset: int, whence: int = 0) -> int:
        if self._on_disk:
            return await asyncio.to_thread(self.file.seek, offset, whence)
        return self.file.seek(offset, whence)

    async def close(self) -> None:
        if self._on_disk:
            await asyncio.to_thread(self.file.close)
        else:
            self.file.close()

    def __repr__(self) -> str:
        return f"UploadFile(filename={self.filename!r}, content_type={self.content_type!r}, size={self.size})"


class FormData:
    """An immutable multi-dict of a form's fields in body order.  ``get``/``[]`` give a key's last
    value (like ``request.query``), ``getall``/``getlist`` every value; ``items()`` yields every
    pair, repeated keys included; ``keys()``, ``len()`` and ``in`` see each key once."""

    __slots__ = ("_items", "_index")

    def __init__(self, items=()):
        self._items = tuple(items)
        index: dict[str, list] = {}
        for k, v in self._items:
            index.setdefault(k, []).append(v)
        self._index = index

    def get(self, key: str, default=None):
        vals = self._index.get(key)
        return vals[-1] if vals else default

    def getall(self, key: str) -> list:
        return list(self._index.get(key, ()))

    getlist = getall

    def __getitem__(self, key: str):
        return self._index[key][-1]

    def __contains__(self, key) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def keys(self):
        return self._index.keys()

    def items(self) -> tuple:
        return self._items

    def files(self) -> list[UploadFile]:
        return [v for _, v in self._items if isinstance(v, UploadFile)]

    async def close(self) -> None:
        for f in self.files():
            await f.close()

    def __repr__(self) -> str:
        return f"FormData({list(self._items)!r})"


def _decode_text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(f"{what} is not valid UTF-8") from None


def _too_large(limit: int, what: str) -> PayloadTooLarge:
    return PayloadTooLarge(limit, f"{what} exceeds {limit} bytes")


class _Limits:
    """FormLimits resolved for one request (the defaults that depend on it filled in)."""

    __slots__ = ("parts", "fields", "files", "field", "file", "total", "part_headers", "spool")

    def __init__(self, limits: FormLimits, max_body: int):
        self.parts = limits.max_parts
        self.fields = min(self.parts, limits.max_fields) if limits.max_fields is not None else self.parts
        self.files = min(self.parts, limits.max_files) if limits.max_files is not None else self.parts
        self.field = limits.max_field_size
        self.total = limits.max_total_size if limits.max_total_size is not None else max_body
        self.file = limits.max_file_size if limits.max_file_size is not None else self.total
        self.part_headers = limits.max_part_header_bytes
        self.spool = limits.spool_threshold


class _UrlencodedReader:
    """``a=1&b=x+y``: the parser's callbacks collect each pair (no I/O, so all of it runs inline)."""

    def __init__(self, limits: _Limits):
        self.limits = limits
        self.items: list = []
        self.name = bytearray()
        self.value = bytearray()
        self.current = self.name
        self.parser = QuerystringParser({
            "on_field_start": self._start, "on_field_name": self._name, "on_field_data": self._data,
            "on_field_end": self._end})

    def _start(self) -> None:
        if len(self.items) >= self.limits.fields:
            raise PayloadTooLarge(self.limits.fields, f"the form has more than {self.limits.fields} fields")
        self.name, self.value = bytearray(), bytearray()

    def _add(self, buf: bytearray, data: bytes, start: int, end: int) -> None:
        buf += data[start:end]
        if len(self.name) + len(self.value) > self.limits.field:
            raise _too_large(self.limits.field, "a form field")

    def _name(self, data: bytes, start: int, end: int) -> None:
        self._add(self.name, data, start, end)

    def _data(self, data: bytes, start: int, end: int) -> None:
        self._add(self.value, data, start, end)

    def _end(self) -> None:
        if not self.name and not self.value:  # "a=1&&b=2": an empty pair is no field
            return
        name = _decode_text(unquote_to_bytes(bytes(self.name).replace(b"+", b" ")), "a form field name")
        value = _decode_text(unquote_to_bytes(bytes(self.value).replace(b"+", b" ")), f"form field {name!r}")
        self.items.append((name, value))

    async def feed(self, chunk: bytes) -> None:
        try:
            self.parser.write(chunk)
        except FormParserError as e:
            raise BadRequest(f"malformed form body: {e}") from None

    async def finish(self) -> list:
        self.parser.finalize()
        return self.items

    async def abort(self) -> None:
        pass


class _Part:
    """The part being read: a text field (``buf``) or a file (``upload``)."""

    __slots__ = ("name", "buf", "upload")

    def __init__(self, name: str, upload: UploadFile | None):
        self.name = name
        self.upload = upload
        self.buf = bytearray() if upload is None else None


class _MultipartReader:
    """multipart/form-data.  The parser's callbacks run inside its synchronous ``write`` and only
    queue events; ``feed`` then handles them, awaiting the disk writes of files that spilled over."""

    def __init__(self, boundary: bytes, limits: _Limits):
        self.limits = limits
        self.items: list = []
        self.uploads: list[UploadFile] = []
        self.events: list = []
        self.parts = self.fields = 0
        self.part: _Part | None = None
        self.headers: list = []
        self.hname, self.hvalue = bytearray(), bytearray()
        self.hbytes = 0
        try:
            self.parser = MultipartParser(boundary, {
                "on_part_begin": self._part_begin, "on_header_field": self._header_field,
                "on_header_value": self._header_value, "on_header_end": self._header_end,
                "on_headers_finished": self._headers_done, "on_part_data": self._data,
                "on_part_end": self._part_end}, max_header_size=limits.part_headers)
        except FormParserError as e:  # e.g. a boundary over 256 bytes
            raise BadRequest(f"malformed multipart Content-Type: {e}") from None

    # -- parser callbacks (synchronous, inside parser.write) -----------------------------------
    def _part_begin(self) -> None:
        self.parts += 1
        if self.parts > self.limits.parts:
            raise PayloadTooLarge(self.limits.parts, f"the form has more than {self.limits.parts} parts")
        self.headers, self.hbytes = [], 0
        self.hname, self.hvalue = bytearray(), bytearray()

    def _count_header(self, n: int) -> None:
        self.hbytes += n
        if self.hbytes > self.limits.part_headers:
            raise _too_large(self.limits.part_headers, "the headers of a multipart part")

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self.hname += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self.hvalue += data[start:end]

    def _header_end(self) -> None:
        self.headers.append((self.hname.decode("latin-1").lower(), self.hvalue.decode("latin-1")))
        self.hname, self.hvalue = bytearray(), bytearray()

    def _headers_done(self) -> None:
        self.events.append(("begin", self.headers))

    def _data(self, data: bytes, start: int, end: int) -> None:
        self.events.append(("data", memoryview(data)[start:end]))

    def _part_end(self) -> None:
        self.events.append(("end", None))

    # -- event handling (async) ----------------------------------------------------------------
    def _begin(self, headers: list) -> _Part:
        h = Headers(headers)
        disposition = h.get("content-disposition")
        kind, params = parse_options_header(disposition)
        name = params.get(b"name")
        if kind != b"form-data" or name is None:
            raise BadRequest("a multipart part has no Content-Disposition: form-data with a name")
        name_s = name.decode("utf-8", "replace")
        filename = params.get(b"filename")
        extended = _ext_filename(disposition)
        if filename is None and extended is None:
            self.fields += 1
            if self.fields > self.limits.fields:
                raise PayloadTooLarge(self.limits.fields, f"the form has more than {self.limits.fields} fields")
            return _Part(name_s, None)
        if len(self.uploads) >= self.limits.files:
            raise PayloadTooLarge(self.limits.files, f"the form has more than {self.limits.files} files")
        if extended is None:
            extended = filename.decode("utf-8", "replace")
        upload = UploadFile(_basename(extended), h.get("content-type") or "application/octet-stream", h,
                            self.limits.spool)
        self.uploads.append(upload)
        return _Part(name_s, upload)

    async def _add(self, data) -> None:
        part = self.part
        if part.upload is None:
            part.buf += data
            if len(part.buf) > self.limits.field:
                raise _too_large(self.limits.field, f"form field {part.name!r}")
        else:
            if part.upload.size + len(data) > self.limits.file:
                raise _too_large(self.limits.file, f"file {part.name!r}")
            await part.upload._append(data)

    async def _end(self) -> None:
        part, self.part = self.part, None
        if part.upload is None:
            self.items.append((part.name, _decode_text(bytes(part.buf), f"form field {part.name!r}")))
        else:
            await part.upload.seek(0)
            self.items.append((part.name, part.upload))

    async def feed(self, chunk: bytes) -> None:
        try:
            self.parser.write(chunk)
        except FormParserError as e:
            if str(e).startswith("Maximum header"):  # python-multipart's own per-line/count limits
                raise _too_large(self.limits.part_headers, f"a multipart part header ({e})") from None
            raise BadRequest(f"malformed multipart body: {e}") from None
        events, self.events = self.events, []
        for kind, payload in events:
            if kind == "data":
                await self._add(payload)
            elif kind == "begin":
                self.part = self._begin(payload)
            else:
                await self._end()

    async def finish(self) -> list:
        if self.parser.state != MultipartState.END:
            raise BadRequest("malformed multipart body: it ends before its closing boundary")
        return self.items

    async def abort(self) -> None:
        for f in self.uploads:
            await f.close()


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_EXT_FILENAME = re.compile(r";\s*filename\*\s*=\s*([^;\s]*)", re.IGNORECASE)


def _ext_filename(disposition: str) -> str | None:
    """The decoded RFC 8187 ``filename*=UTF-8''caf%C3%A9.txt`` of a Content-Disposition; None when
    there is none or it cannot be decoded (then ``filename`` is used).  python-multipart drops it."""
    if "*" not in disposition:  # the common case: nothing to look for
        return None
    # quoted strings blanked first, so a 'filename*=' inside another parameter's value is not seen
    m = _EXT_FILENAME.search(_QUOTED.sub('""', disposition))
    if m is None:
        return None
    charset, q1, rest = m.group(1).partition("'")
    _language, q2, value = rest.partition("'")
    charset = charset.lower()
    if not (q1 and q2) or charset not in ("utf-8", "iso-8859-1"):  # the two RFC 8187 requires
        return None
    try:
        return unquote_to_bytes(value).decode(charset)
    except UnicodeDecodeError:
        return None


def _basename(filename: str) -> str:
    """The last segment of a client-sent path, either separator; ``.`` and ``..`` are no name."""
    name = filename.rpartition("/")[2].rpartition("\\")[2]
    return "" if name in (".", "..") else name


def _reader(content_type: str | None, limits: _Limits):
    kind, params = parse_options_header(content_type)
    if kind == _MULTIPART:
        boundary = params.get(b"boundary")
        if not boundary:
            raise BadRequest("multipart/form-data without a boundary parameter")
        return _MultipartReader(boundary, limits)
    if kind == _URLENCODED:
        return _UrlencodedReader(limits)
    got = kind.decode("latin-1") if kind else "no Content-Type"
    raise UnsupportedMediaType(f"expected {_URLENCODED.decode()} or {_MULTIPART.decode()}, got {got}")


async def read_form(request, limits: FormLimits | None = None) -> FormData:
    """Parse ``request``'s body as a form (see the module docstring for the limits and errors)."""
    app = request.app
    if limits is None:
        limits = getattr(app, "form_limits", None) or DEFAULT_LIMITS
    lim = _Limits(limits, request.max_body)
    content_type = request.header("content-type")
    if content_type is None and not await request.body():
        return FormData()  # nothing was sent: an empty form, whose fields take their defaults (as FastAPI)
    reader = _reader(content_type, lim)
    timeout = app.body_timeout if app is not None else None
    try:
        with deadline(timeout):  # None: no limit
            await _feed_body(request, reader, lim.total)
        items = await reader.finish()
    except TimeoutError:
        await reader.abort()
        raise RequestTimeout(timeout) from None
    except BaseException:
        await reader.abort()
        raise
    finally:
        reader.parser = None  # its callbacks are the reader's methods: break the cycle, free it now
    return FormData(items)


async def _feed_body(request, reader, limit: int) -> None:
    """The body into ``reader``: the one already read, else each chunk as it arrives."""
    async for chunk in request._limited_chunks(limit):
        await reader.feed(chunk)
