"""Files: ``FileResponse`` (one file, with validators, conditional requests and byte ranges) and
``StaticFiles`` (a directory served under a mount, and never anything outside it).

``FileResponse(path, request=request)`` answers as RFC 9110 says for GET and HEAD:

* validators: a weak ``ETag`` (size and mtime: cheap, no hashing, so only weakly reliable) and
  ``Last-Modified``.  In RFC 9110 13.2.2's order: ``If-Match`` (strong comparison, so only ``*``
  matches our weak tag) or else ``If-Unmodified-Since`` -> 412; ``If-None-Match`` (weak comparison)
  or else ``If-Modified-Since`` -> 304.
* ``Range: bytes=a-b | a- | -n`` -> 206 with ``Content-Range``; no range overlapping the file -> 416
  with ``Content-Range: bytes */size``.  Several ranges that overlap or touch are merged into one
  (14.2 allows it); ranges that stay apart, another unit or bad syntax make the Range ignored: the
  whole file, 200 (RFC 9110 lets a server ignore Range; multipart/byteranges is not built, which
  also closes the many-small-ranges amplification).  ``If-Range`` with a date equal to
  ``Last-Modified`` keeps the range; with an ETag it never does, since ours is weak and If-Range
  needs a strong match (13.1.5): the client gets the whole file, which is always correct.
* HEAD: the same headers, no body.

Without ``request`` (``return FileResponse(path)``, as with Starlette) the app gives it the request
before sending it (``negotiate``): the answer is the same, only native middleware sees the response
before that (a 200 of the whole file).  A response with another ``status`` is sent as it is.  On ASGI
the file is read off the
event loop in 64 KiB chunks (or handed to the server with the ``http.response.pathsend`` extension,
e.g. granian, when it is sent whole); on RSGI granian sends it itself (``response_file`` /
``response_file_range``, end exclusive).
"""
from __future__ import annotations

import asyncio
import mimetypes
import os
import re
import stat as stat_mod
from datetime import timezone
from email.utils import formatdate, parsedate_to_datetime
from time import time
from urllib.parse import quote

from .exceptions import NotFound
from .responses import (CT_PROBLEM, PerRequestResponse, RedirectResponse, _encode_headers, _media_type_bytes, problem,
                        wait_for_disconnect)
from .routing import encode_path

__all__ = ["FileResponse", "StaticFiles", "parse_range", "content_disposition", "guess_media_type",
           "safe_relative_path", "UNSATISFIABLE", "CHUNK_SIZE"]

CHUNK_SIZE = 64 * 1024
UNSATISFIABLE = "unsatisfiable"  # parse_range's answer for a range past the end (-> 416)
MAX_RANGE_HEADER = 200  # longer Range values are ignored (a single range needs far less)
_BYTES_UNIT = re.compile(r"\s*bytes\s*=", re.I)
_RANGE_SPEC = re.compile(r"\s*([0-9]{0,30})\s*-\s*([0-9]{0,30})\s*\Z")
_TAGS = re.compile(r'(?:W/)?"([^"]*)"')
_COMPRESSED = {"gzip": "application/gzip", "bzip2": "application/x-bzip2", "xz": "application/x-xz",
               "br": "application/x-brotli", "compress": "application/x-compress"}


def parse_range(header: str, size: int):
    """The ``bytes`` range to send of a file of ``size`` bytes: ``(start, end)`` with ``end``
    exclusive, ``UNSATISFIABLE`` when no range overlaps the file, or None when the header is to be
    ignored (bad syntax, or ranges that stay apart once overlapping and touching ones are merged)."""
    if len(header) > MAX_RANGE_HEADER:
        return None
    m = _BYTES_UNIT.match(header)
    if m is None:
        return None
    specs = [spec for spec in header[m.end():].split(",") if spec.strip()]  # empty elements are allowed (5.6.1)
    if not specs:
        return None
    spans = []
    for spec in specs:
        one = _one_range(spec, size)
        if one is None:  # one invalid range-spec makes the whole header invalid: ignored
            return None
        if one is not UNSATISFIABLE:
            spans.append(one)
    if not spans:
        return UNSATISFIABLE
    spans.sort()
    start, end = spans[0]
    for s, e in spans[1:]:
        if s > end:  # a gap: this would take multipart/byteranges
            return None
        end = max(end, e)
    return start, end


def _one_range(spec: str, size: int):
    m = _RANGE_SPEC.match(spec)
    if m is None:
        return None
    first, last = m.groups()
    if first:
        start = int(first)
        if last and int(last) < start:  # an invalid range-spec: ignored
            return None
        if start >= size:
            return UNSATISFIABLE
        return start, size if not last else min(int(last) + 1, size)
    if last:  # "-n": the last n bytes
        n = int(last)
        return UNSATISFIABLE if n == 0 or size == 0 else (max(0, size - n), size)
    return None


def _http_date(text: str) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, not the server's local time
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.timestamp()
    except (ValueError, OverflowError):
        return None


def _precondition_failed(request, mtime: int) -> bool:
    """If-Match (strong comparison: our weak tag never matches, only ``*``), else If-Unmodified-Since."""
    im = request.header("if-match")
    if im is not None:
        return im.strip() != "*"
    ius = request.header("if-unmodified-since")
    if ius is None:
        return False
    since = _http_date(ius)
    return since is not None and mtime > since  # not a date: ignored (13.1.4)


def _not_modified(request, opaque_tag: str, mtime: int) -> bool:
    """If-None-Match (weak comparison; ``*`` matches any file), else If-Modified-Since."""
    inm = request.header("if-none-match")
    if inm is not None:
        return inm.strip() == "*" or opaque_tag in _TAGS.findall(inm)
    ims = request.header("if-modified-since")
    if ims is None:
        return False
    since = _http_date(ims)
    return since is not None and since <= time() and mtime <= since  # a date in the future is invalid


def _range_allowed(if_range: str | None, mtime: int) -> bool:
    if if_range is None:
        return True
    if if_range.lstrip().startswith(('"', "W/")):  # an entity tag: ours is weak, never a strong match
        return False
    when = _http_date(if_range)
    return when is not None and int(when) == mtime


def content_disposition(filename: str, kind: str = "attachment") -> str:
    """RFC 6266: a quoted ASCII ``filename`` plus ``filename*`` (RFC 8187, UTF-8) when the name is not
    plain ASCII."""
    if kind not in ("attachment", "inline"):
        raise ValueError(f"content disposition is 'attachment' or 'inline', not {kind!r}")
    name = "".join(c for c in filename if c >= " " and c != "\x7f")  # no controls: no header splitting
    ascii_name = "".join(c if c < "\x7f" else "_" for c in name)
    value = '{}; filename="{}"'.format(kind, ascii_name.replace("\\", "\\\\").replace('"', '\\"'))
    if ascii_name != name:
        value += "; filename*=UTF-8''" + quote(name, safe="!#$&+^`|")
    return value


def guess_media_type(path: str) -> str:
    """The Content-Type for a file name (``mimetypes``); text types say UTF-8, a compressed file is
    sent as the archive it is (no Content-Encoding: its bytes go out as they are)."""
    media_type, encoding = mimetypes.guess_type(path, strict=False)
    if encoding is not None:
        return _COMPRESSED.get(encoding, "application/octet-stream")
    if media_type is None:
        return "application/octet-stream"
    return media_type + "; charset=utf-8" if media_type.startswith("text/") else media_type


def _open(path: str):
    """``(fd, fstat)`` of a regular file; OSError otherwise.  O_NONBLOCK: a FIFO put in the file's
    place must not block the thread in open()."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat_mod.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file any more")
    return fd, st


def _opaque_tag(st) -> str:
    return f"{st.st_size:x}-{st.st_mtime_ns:x}"


def _validators(tag: str, mtime: int) -> list:
    return [(b"etag", f'W/"{tag}"'.encode()), (b"last-modified", formatdate(mtime, usegmt=True).encode())]


def _stat(path: str):
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


class FileResponse(PerRequestResponse):
    """A file from disk; see the module docstring for what ``request`` enables.  The file is stat'ed
    here (pass ``stat_result`` to reuse one, as ``StaticFiles`` does off the event loop), so
    ``status`` and the headers are final before anything is sent; a missing file raises ``NotFound``.
    ``filename`` makes it a download (``Content-Disposition``, ``content_disposition_type``)."""

    __slots__ = ("path", "chunk_size", "size", "_stamp", "_range", "_body", "_head", "wants_request", "_validation")

    def __init__(self, path, status: int = 200, headers=None, media_type: str | None = None,
                 filename: str | None = None, *, request=None, stat_result=None,
                 content_disposition_type: str = "attachment", chunk_size: int = CHUNK_SIZE):
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        self.path = os.path.abspath(os.fspath(path))
        st = stat_result if stat_result is not None else _stat(self.path)
        if st is None or not stat_mod.S_ISREG(st.st_mode):
            raise NotFound("file not found")
        self.status, self.chunk_size, self.size = status, chunk_size, st.st_size
        self._stamp = (st.st_size, st.st_mtime_ns)  # to notice a change before the file is opened
        self._range = None  # (start, end exclusive) of a 206
        self._body = None  # bytes sent instead of the file (304, 412, 416)
        self._head = request is not None and request.method == "HEAD"
        mtime = int(st.st_mtime)
        tag = _opaque_tag(st)
        validators = _validators(tag, mtime)
        extra = _encode_headers(headers) if headers else []
        content_type = _media_type_bytes(media_type) if media_type else guess_media_type(self.path).encode("latin-1")
        raw = [(b"content-type", content_type), (b"accept-ranges", b"bytes")]
        if filename is not None:
            raw.append((b"content-disposition", content_disposition(filename, content_disposition_type).encode()))
        self.raw_headers = raw + validators + extra
        self._validation = (tag, mtime, validators + extra)
        self.wants_request = request is None and status == 200
        if request is not None and status == 200 and request.method in ("GET", "HEAD"):
            self._negotiate(request, tag, mtime, validators + extra)
        if self._body is None:
            start, end = self._range or (0, self.size)
            self.raw_headers.append((b"content-length", b"%d" % (end - start)))

    def negotiate(self, request) -> None:
        """What ``request=`` gives, for a response made without it (the app calls this before sending):
        HEAD, and the conditional and Range headers of a GET or HEAD."""
        if not self.wants_request:
            return
        self.wants_request = False
        self._head = request.method == "HEAD"
        if request.method in ("GET", "HEAD"):
            self.raw_headers.pop()  # the whole file's Content-Length, added last
            self._negotiate(request, *self._validation)
            if self._body is None:
                start, end = self._range or (0, self.size)
                self.raw_headers.append((b"content-length", b"%d" % (end - start)))

    def _negotiate(self, request, tag: str, mtime: int, not_modified_headers: list) -> None:
        """412, 304, 206 or 416 instead of 200, as the request's conditional and Range headers say."""
        if _precondition_failed(request, mtime):
            self._answer_problem(412, "Precondition Failed", "the file does not match the request's preconditions")
            return
        if _not_modified(request, tag, mtime):
            self.status, self._body, self.raw_headers = 304, b"", not_modified_headers
            return
        header = request.header("range") if request.method == "GET" else None  # Range is GET-only
        if header is None or not _range_allowed(request.header("if-range"), mtime):
            return
        wanted = parse_range(header, self.size)
        if wanted is UNSATISFIABLE:
            self._answer_problem(416, "Range Not Satisfiable", f"the file has {self.size} bytes")
            self.raw_headers.append((b"content-range", b"bytes */%d" % self.size))
        elif wanted is not None:
            self.status, self._range = 206, wanted
            self.raw_headers.append((b"content-range", b"bytes %d-%d/%d" % (wanted[0], wanted[1] - 1, self.size)))

    def _answer_problem(self, status: int, title: str, detail: str) -> None:
        body = problem(status, title, detail).body
        self.status, self._body = status, body
        self.raw_headers = [(b"content-type", CT_PROBLEM), (b"content-length", b"%d" % len(body))]

    def _changed_since_stat(self, st) -> None:
        """The file was replaced or rewritten between the stat and the open: the headers describe the
        old one.  Send the new file whole, with its own validators (a 200 is a right answer to a
        range request too), rather than its bytes under the old ETag and length."""
        self.size, self._range = st.st_size, None
        if self.status == 206:
            self.status = 200
        new = dict(_validators(_opaque_tag(st), int(st.st_mtime)))
        new[b"content-length"] = b"%d" % st.st_size
        self.raw_headers = [(k, new.get(k, v)) for k, v in self.raw_headers if k != b"content-range"]

    async def __call__(self, scope, receive, send) -> None:
        head = self._head or scope.get("method") == "HEAD"
        start = {"type": "http.response.start", "status": self.status, "headers": self.raw_headers}
        if self._body is not None or head:
            await send(start)
            await send({"type": "http.response.body", "body": b"" if head else self._body})
            return
        if self._range is None and "http.response.pathsend" in (scope.get("extensions") or ()):
            await send(start)
            await send({"type": "http.response.pathsend", "path": self.path})
            return
        try:
            fd, st = await asyncio.to_thread(_open, self.path)
        except OSError:  # gone since it was stat'ed
            self.status = 404
            return await problem(404, "Not Found", "file not found")(scope, receive, send)
        try:
            if (st.st_size, st.st_mtime_ns) != self._stamp:
                self._changed_since_stat(st)
                start = {"type": "http.response.start", "status": self.status, "headers": self.raw_headers}
            await send(start)
            await self._send_chunks(fd, *(self._range or (0, self.size)), receive, send)
        finally:
            os.close(fd)

    async def _send_chunks(self, fd: int, offset: int, end: int, receive, send) -> None:
        # uvicorn drops what is sent after the client left without saying so: watch for the
        # disconnect when there is more than one chunk, so a big file is not read for nobody.
        gone = asyncio.ensure_future(wait_for_disconnect(receive)) if end - offset > self.chunk_size else None
        try:
            while True:
                n = min(self.chunk_size, end - offset)
                chunk = await asyncio.to_thread(os.pread, fd, n, offset) if n else b""
                if len(chunk) != n:  # the Content-Length is already out: abort rather than send less
                    raise RuntimeError(f"{self.path} shrank while it was being sent")
                offset += n
                if gone is not None and gone.done():
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": offset < end})
                if offset >= end:
                    return
        finally:
            if gone is not None:
                gone.cancel()

    async def send_rsgi(self, proto) -> None:
        headers = self.rsgi_headers()
        if self._body is not None:
            if self.status == 304:
                proto.response_empty(304, headers)
            else:
                proto.response_bytes(self.status, headers, self._body)
        elif self._head:  # granian keeps the given Content-Length on a HEAD
            proto.response_empty(self.status, headers)
        elif self._range is None:
            proto.response_file(self.status, headers, self.path)
        else:
            proto.response_file_range(self.status, headers, self.path, *self._range)


def safe_relative_path(path: str) -> str | None:
    """``path`` if it is a relative path made of plain names only (a trailing '/' kept), else None:
    no '..', '.', empty segments, leading '/', backslash or NUL.  The server has already decoded
    percent-escapes (so ``%2e%2e`` arrives here as ``..``); it is not decoded again."""
    if not isinstance(path, str) or len(path) > 4096 or "\x00" in path or "\\" in path or path.startswith("/"):
        return None
    body = path[:-1] if path.endswith("/") else path
    if body and any(part in ("", ".", "..") for part in body.split("/")):
        return None
    return path


_ADD_SLASH = object()  # lookup's answer for a directory asked for without its trailing '/'


class StaticFiles:
    """Serve the files under ``directory``: ``await static(request, path)`` -> a ``FileResponse``
    (conditional requests and ranges included); ``NotFound`` for anything else.

    ``html``: a directory serves its ``index.html`` (``dir`` redirects to ``dir/``, the query string
    kept), and anything not found is answered with the root's ``404.html`` (status 404) when there is
    one; otherwise a directory is a 404, like a missing file.  ``follow_symlink``: False (default)
    serves a file only if its real path, symlinks resolved, is inside the directory; True lets
    symlinks inside the tree point anywhere (the path itself still cannot climb out).  ``max_age``:
    ``Cache-Control: public, max-age=N``.  Dot files are served like any other file."""

    def __init__(self, directory, *, html: bool = False, follow_symlink: bool = False, max_age: int | None = None):
        root = os.path.realpath(os.fspath(directory))
        if not os.path.isdir(root):
            raise ValueError(f"StaticFiles: {directory!r} is not a directory")
        if max_age is not None and (isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0):
            raise ValueError(f"max_age must be an int >= 0 (seconds), not {max_age!r}")
        self.root = root
        self._prefix = root if root.endswith(os.sep) else root + os.sep
        self.html = html
        self.follow_symlink = follow_symlink
        self._headers = None if max_age is None else [("cache-control", f"public, max-age={max_age}")]
        mimetypes.init()  # now, not on the first request

    async def __call__(self, request, path: str):
        rel = safe_relative_path(path)
        found = None if rel is None else await asyncio.to_thread(self.lookup, rel)
        if found is None:
            page = await asyncio.to_thread(self.lookup, "404.html") if self.html else None
            if page is None or page is _ADD_SLASH:
                raise NotFound("file not found")
            return FileResponse(page[0], 404, stat_result=page[1])  # not cached like the files are
        if found is _ADD_SLASH:
            url = "/" + encode_path(request.path).lstrip("/") + "/"
            if request.query_string:  # RedirectResponse escapes what a Location cannot hold
                url += "?" + request.query_string
            return RedirectResponse(url, 307)
        full, st = found
        return FileResponse(full, headers=self._headers, request=request, stat_result=st)

    def contained(self, path: str) -> str | None:
        """``path`` (resolved unless ``follow_symlink``) when it is inside the root, else None."""
        real = os.path.normpath(path) if self.follow_symlink else os.path.realpath(path)
        return real if real == self.root or real.startswith(self._prefix) else None

    def lookup(self, rel: str):
        """The file for a ``safe_relative_path``: ``(path, stat)``, ``_ADD_SLASH`` or None.  Blocking
        (realpath and stat): run in a thread."""
        want_dir = rel == "" or rel.endswith("/")
        try:
            full = self.contained(os.path.join(self.root, rel.rstrip("/")))
            st = os.stat(full) if full is not None else None
            if st is not None and stat_mod.S_ISDIR(st.st_mode):
                if not self.html:
                    return None
                if not want_dir:
                    return _ADD_SLASH
                full = self.contained(os.path.join(full, "index.html"))
                st = os.stat(full) if full is not None else None
            elif want_dir:  # "file.txt/"
                return None
        except (OSError, ValueError):  # missing, a loop, too long, not encodable...
            return None
        if st is None or not stat_mod.S_ISREG(st.st_mode):  # FIFOs and devices are never opened
            return None
        return full, st
