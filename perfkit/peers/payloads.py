"""What the aquilia_app peers share: byte-for-byte what aquilia_app's /ping, /json, /json-large, /html and
/stream send (the /html peers render aquilia_app's own html/page.html with HTML_ROWS), and the contract of the
/items, /page and /ws-echo workloads that every system must honour alike.

``render_html()`` renders that template with a Jinja2 environment set up like aquilia_app's (autoescape,
no reload), compiled once at import; the template is found through the installed ``aquilia_app`` package
(located, not imported, so importing this module never builds the app).  The items schema is read from the
same package's ``app_schema.py`` (a module without side effects), so every peer stores items alike.

The /page helpers at the end (signed-cookie sessions with itsdangerous, gzip) are for the peers whose
framework has no such feature of its own (Sanic without sanic-ext, Falcon); the others use their framework's.
"""
import atexit
import functools
import gzip
import importlib.util
import os
import runpy
import shutil
import sqlite3
import tempfile

import orjson

JSON_SMALL = {
    "message": "Hello, World!",
    "service": "aquilia_app",
    "version": 1,
    "ok": True,
    "ratio": 0.75,
    "tags": ["fast", "async", "typed", "asgi"],
    "numbers": [1, 2, 3, 4, 5, 6, 7, 8],
    "nested": {"id": 42, "name": "answer", "active": False, "score": 99.5},
}
PONG = b"pong"
JSON_LARGE = [{"id": i, "name": f"item-{i}", "value": (i % 10) * 0.5} for i in range(1000)]
HTML_ROWS = [{"id": i, "message": m} for i, m in enumerate(
    ["fortune favours the bold", "<script>alert('escaped')</script>", "a penny saved", "měřeno, ne odhadnuto",
     "keep it simple", "measure twice", "cut once", "premature optimization", "the map is not the territory",
     "less is more", "make it work, make it right, make it fast", "ship it"], start=1)]
HTML_CONTEXT = {"title": "aquilia_app", "service": "aquilia_app", "rows": HTML_ROWS}
STREAM_CHUNK = b"x" * 1023 + b"\n"  # /stream: STREAM_CHUNKS chunks of 1 KiB, sent as they come (chunked)
STREAM_CHUNKS = 10


def _aquilia_app_dir() -> str | None:
    spec = importlib.util.find_spec("aquilia_app")
    if spec is None or not spec.submodule_search_locations:
        return None
    return spec.submodule_search_locations[0]


def _compile_page():
    """aquilia_app's page.html, compiled once at import; None where aquilia_app is not installed (perfkit's own
    tests run raw_asgi.py without it: then only /html is missing, and it answers 500 saying why)."""
    pkg = _aquilia_app_dir()
    if pkg is None:
        return None
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(pkg, "html")),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             auto_reload=False)
    return env.get_template("page.html")


PAGE = _compile_page()


def render_html() -> str:
    if PAGE is None:
        raise RuntimeError("/html needs aquilia_app's html/page.html: the aquilia_app package is not importable")
    return PAGE.render(HTML_CONTEXT)


async def stream_chunks():
    """/stream's body, chunk by chunk (an async generator: what every framework's streaming response takes)."""
    for _ in range(STREAM_CHUNKS):
        yield STREAM_CHUNK


# -- POST /items: aquilia_app's ItemIn limits, its schema, and one INSERT per item --------------------------
ITEM_NAME_MAX = 100   # name: 1..100 characters
ITEM_PRICE_MAX = 1e9  # price: 0..1e9
ITEM_TAGS_MAX = 16    # at most 16 tags ...
ITEM_TAG_MAX = 32     # ... of at most 32 characters; unknown fields are refused
INSERT_ITEM = "INSERT INTO items (name, price, tags) VALUES (?, ?, ?)"
DB_ENV = "PERFKIT_PEER_DB"  # the scenario points it at the system's ${tmp}
BUSY_TIMEOUT_S = 10.0  # as aquilia_app's pool: a writer waits for SQLite's lock instead of failing


_own_db_dir: list[str] = []  # the temp dir items_db_path made in this process, if any


def items_db_path() -> str:
    """The peer's SQLite file: $PERFKIT_PEER_DB, else a file in a fresh temp dir (exported, so that the
    worker processes of a multi-process server use the same file), removed by close_items_db or at exit."""
    path = os.environ.get(DB_ENV)
    if not path:
        folder = tempfile.mkdtemp(prefix="perfkit_peer_db_")
        _own_db_dir.append(folder)
        atexit.register(shutil.rmtree, folder, True)
        path = os.environ[DB_ENV] = os.path.join(folder, "items.sqlite3")
    return path


def prepare_items_db(path: str) -> None:
    """aquilia_app's schema, and WAL mode set once in the file (as aquilia_app's server does before its
    workers start: N processes switching a new file to WAL at once contend for SQLite's exclusive lock)."""
    pkg = _aquilia_app_dir()
    if pkg is None:
        raise RuntimeError("/items needs aquilia_app's app_schema.py: the aquilia_app package is not importable")
    schema = runpy.run_path(os.path.join(pkg, "app_schema.py"))["SCHEMA"]
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    try:
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(schema)
    finally:
        conn.close()


async def open_items_db(path: str):
    """One aiosqlite connection for the process (its own thread), set up like aquilia_app's connections:
    WAL (from prepare_items_db) with synchronous=NORMAL, so a commit costs the same everywhere."""
    import aiosqlite  # only the peers serving /items need it

    prepare_items_db(path)
    db = await aiosqlite.connect(path, timeout=BUSY_TIMEOUT_S)
    await db.execute("PRAGMA synchronous=NORMAL")
    return db


async def close_items_db(db) -> None:
    """Close the connection; remove the temp dir this process made (uvicorn ends by re-raising the signal
    that stopped it, so atexit never runs there)."""
    await db.close()
    while _own_db_dir:
        shutil.rmtree(_own_db_dir.pop(), ignore_errors=True)


async def store_item(db, name: str, price: float, tags: list[str]) -> dict:
    """Insert one validated item and answer it as stored (tags as JSON text, as aquilia_app stores them)."""
    cursor = await db.execute(INSERT_ITEM, (name, price, orjson.dumps(tags).decode()))
    await db.commit()
    return {"id": cursor.lastrowid, "name": name, "price": price, "tags": tags}


# -- GET /page: a signed-cookie session counting visits, CORS for one origin, the page gzipped --------------
SESSION_COOKIE = "session"
SESSION_SECRET = "perfkit-bench-only-session-key!!"  # 32 bytes: also a valid AES key (Litestar's sessions)
SESSION_MAX_AGE = 14 * 24 * 3600  # seconds (Starlette's and Litestar's default)
CORS_ORIGIN = "https://app.example"
GZIP_MIN_SIZE = 500  # bytes: smaller answers go out uncompressed
GZIP_LEVEL = 6  # zlib's default; set explicitly where a framework's default differs (Starlette's and Litestar's: 9)


def render_page(visits: int) -> str:
    """/page: the /html template, its ``service`` line carrying the visit count."""
    if PAGE is None:
        raise RuntimeError("/page needs aquilia_app's html/page.html: the aquilia_app package is not importable")
    return PAGE.render(title="aquilia_app", service=f"aquilia_app (visit {visits})", rows=HTML_ROWS)


# Written by hand (with itsdangerous) for Sanic and Falcon, which have no session feature of their own:
# the session is a JSON object, signed with a timestamp, in one cookie.
@functools.cache
def _session_codec():
    """(signer, its error class); imported on first use: the floors that import this module never need it."""
    import itsdangerous

    return itsdangerous.URLSafeTimedSerializer(SESSION_SECRET, salt="perfkit-peer-session"), itsdangerous.BadData


def read_session(cookie: str | None) -> dict:
    """The session in ``cookie``; a new (empty) one when it is missing, forged, expired or not an object."""
    if not cookie:
        return {}
    signer, bad_data = _session_codec()
    try:
        data = signer.loads(cookie, max_age=SESSION_MAX_AGE)
    except bad_data:
        return {}
    return data if isinstance(data, dict) else {}


def write_session(session: dict) -> str:
    return _session_codec()[0].dumps(session)


def gzip_if_accepted(body: bytes, accept_encoding: str | None) -> bytes | None:
    """The body gzipped when the client accepts gzip and the body is worth it, else None (send it as is)."""
    if len(body) < GZIP_MIN_SIZE or "gzip" not in (accept_encoding or "").lower():
        return None
    return gzip.compress(body, GZIP_LEVEL)
