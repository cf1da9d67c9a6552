"""An app for the form and parameter tests (test_forms.py, test_params.py), served by the real granian
and called in process.  No middleware: RSGI requests take the direct path (RSGIRequest)."""
import hashlib
import os
import tempfile

import msgspec

from aquilia_app import App, Request
from aquilia_app.controllers import Cookie, Form, Header
from aquilia_app.forms import FormData, FormLimits, UploadFile

SPOOL = 64 * 1024  # files above this go to disk
MAX_BODY = 4 << 20
TIGHT = FormLimits(max_parts=3, max_field_size=16, max_file_size=100, max_total_size=1000,
                   max_part_header_bytes=200, spool_threshold=10)


def temp_fds() -> int:
    """Open file descriptors of this process that point into the temp directory (spooled uploads)."""
    tmp = tempfile.gettempdir()
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(tmp):
                n += 1
        except OSError:
            pass
    return n


async def describe(value) -> object:
    if isinstance(value, UploadFile):
        data = await value.read()
        await value.seek(0)
        return {"filename": value.filename, "content_type": value.content_type, "size": value.size,
                "sha256": hashlib.sha256(data).hexdigest(), "on_disk": value.on_disk}
    return value


class Signup(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    age: int
    tags: list[str] = []
    avatar: UploadFile | None = None


def create_app(**options) -> App:
    app = App(max_body_size=MAX_BODY, **options)
    app.form_limits = FormLimits(spool_threshold=SPOOL)  # the app-wide defaults
    for path, methods, handler in ROUTES:
        app.route(path, methods)(handler)
    return app


async def healthz():
    return {"status": "ok"}


async def form(request: Request):
    """Every field in body order; files described (size, hash, spooled to disk or not)."""
    data = await request.form()
    return {"items": [[k, await describe(v)] for k, v in data.items()], "temp_fds": temp_fds()}


async def tight(request: Request):
    data = await request.form(TIGHT)
    return {"items": [[k, await describe(v)] for k, v in data.items()]}


async def temp_fds_now():
    return {"temp_fds": temp_fds()}


async def signup(body: Form[Signup]):
    avatar = await describe(body.avatar) if body.avatar is not None else None
    return {"name": body.name, "age": body.age, "tags": body.tags, "avatar": avatar}


async def files(doc: UploadFile, extra: list[UploadFile] = [], note: Form[str] = ""):
    return {"doc": await describe(doc), "extra": [await describe(f) for f in extra], "note": note}


async def whole(data: FormData):
    return {"keys": list(data.keys()), "n": len(data)}


async def params(request: Request, x_token: Header[str], session: Cookie[str | None], tag: list[int] = [],
                 x_multi: Header[list[str]] = []):
    return {"token": x_token, "session": session, "tag": tag, "multi": x_multi,
            "query_list": request.query_list("tag"), "cookies": request.cookies}


ROUTES = [("/healthz", ("GET",), healthz), ("/form", ("POST",), form), ("/tight", ("POST",), tight),
          ("/temp-fds", ("GET",), temp_fds_now), ("/signup", ("POST",), signup), ("/files", ("POST",), files),
          ("/whole", ("POST",), whole), ("/params", ("GET",), params)]
app = create_app()
