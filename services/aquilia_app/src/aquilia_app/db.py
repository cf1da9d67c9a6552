"""A small async-friendly SQLite pool: N sqlite3 connections, each used by one thread at a time.

``await pool.acquire()`` hands out a :class:`Connection` (an ``asyncio.Queue`` of idle connections);
its methods run the sqlite3 call in the pool's own ``ThreadPoolExecutor`` (as many threads as
connections) so the event loop never blocks on disk.  WAL mode lets readers run beside a writer.
A caller waits at most ``acquire_timeout`` seconds for a connection, then gets :class:`PoolTimeout`
(a 503 with ``Retry-After``), so a pool held by slow requests cannot leave others waiting forever.
"""
from __future__ import annotations

import asyncio
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .exceptions import ServiceUnavailable

__all__ = ["SQLitePool", "Connection", "PoolTimeout", "connect_wal", "prepare_database"]

BUSY_TIMEOUT_MS = 10_000
_WAL_ATTEMPTS = 50  # x up to 0.1 s: bounded, then the error surfaces
DEFAULT_ACQUIRE_TIMEOUT = 5.0  # seconds


class PoolTimeout(ServiceUnavailable):
    """No connection became free within the pool's acquire timeout (answered 503 + Retry-After)."""

    def __init__(self, seconds: float):
        super().__init__(f"no database connection became free within {seconds:g} s")


def _retry_busy(fn, *args):
    """Run ``fn`` again while SQLite reports the file locked, a bounded number of times.

    Switching the journal mode needs an exclusive lock, and SQLite answers SQLITE_BUSY at once there
    (it does not always call the busy handler), so several workers opening the same new file at the
    same moment can each see "database is locked".  A short, growing sleep resolves it.
    """
    for attempt in range(_WAL_ATTEMPTS):
        try:
            return fn(*args)
        except sqlite3.OperationalError as e:
            msg = str(e)
            if ("locked" not in msg and "busy" not in msg) or attempt == _WAL_ATTEMPTS - 1:
                raise
            time.sleep(min(0.1, 0.005 * (attempt + 1)))


def connect_wal(path: str) -> sqlite3.Connection:
    """Open ``path`` with a busy timeout, in WAL mode (set only if the file is not WAL already)."""
    raw = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        mode = _retry_busy(lambda: raw.execute("PRAGMA journal_mode").fetchone()[0])
        if str(mode).lower() != "wal":
            _retry_busy(lambda: raw.execute("PRAGMA journal_mode=WAL").fetchone())
        raw.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        raw.close()
        raise
    raw.isolation_level = ""  # back to implicit transactions for `with conn:`
    return raw


def prepare_database(path: str, schema: str) -> None:
    """Create the schema and switch the file to WAL once, before any worker opens it.

    WAL mode is stored in the file, so workers started afterwards find it set and never need the
    exclusive lock that changing it takes.
    """
    raw = connect_wal(path)
    try:
        _retry_busy(raw.executescript, schema)
    finally:
        raw.close()


class Connection:
    __slots__ = ("_raw", "_pool")

    def __init__(self, raw: sqlite3.Connection, pool: "SQLitePool"):
        self._raw = raw
        self._pool = pool

    def _run(self, fn, *args):
        return asyncio.get_running_loop().run_in_executor(self._pool._executor, fn, *args)

    async def fetchall(self, sql: str, params: tuple = ()) -> list[dict]:
        def work():
            cur = self._raw.execute(sql, params)
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row)) for row in cur.fetchall()]
        return await self._run(work)

    async def fetchone(self, sql: str, params: tuple = ()) -> dict | None:
        def work():
            cur = self._raw.execute(sql, params)
            row = cur.fetchone()
            return None if row is None else dict(zip([d[0] for d in cur.description], row))
        return await self._run(work)

    async def execute(self, sql: str, params: tuple = ()) -> tuple[int, int | None]:
        """Run a write in its own transaction; returns (rowcount, lastrowid)."""
        def work():
            with self._raw:
                cur = self._raw.execute(sql, params)
                return cur.rowcount, cur.lastrowid
        return await self._run(work)

    async def executescript(self, script: str) -> None:
        await self._run(self._raw.executescript, script)


class SQLitePool:
    def __init__(self, path: str, size: int = 4, acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT):
        if size < 1:
            raise ValueError("pool size must be >= 1")
        if not acquire_timeout > 0:
            raise ValueError("acquire_timeout must be > 0 seconds")
        self.path = path
        self.size = size
        self.acquire_timeout = acquire_timeout
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="sqlite")
        self._idle: asyncio.Queue | None = None
        self._all: list[sqlite3.Connection] = []

    async def open(self) -> "SQLitePool":
        loop = asyncio.get_running_loop()

        def connect():
            return connect_wal(self.path)

        self._idle = asyncio.Queue()
        for _ in range(self.size):
            raw = await loop.run_in_executor(self._executor, connect)
            self._all.append(raw)
            self._idle.put_nowait(raw)
        return self

    async def acquire(self) -> Connection:
        idle = self._idle
        if not idle.empty():  # the common case: no timer armed
            return Connection(idle.get_nowait(), self)
        try:
            async with asyncio.timeout(self.acquire_timeout):
                raw = await idle.get()
        except TimeoutError:
            raise PoolTimeout(self.acquire_timeout) from None
        return Connection(raw, self)

    def release(self, conn: Connection) -> None:
        self._idle.put_nowait(conn._raw)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for raw in self._all:
            await loop.run_in_executor(self._executor, raw.close)
        self._all.clear()
        self._executor.shutdown(wait=False)

    async def run(self, fn_name: str, *args: Any):
        conn = await self.acquire()
        try:
            return await getattr(conn, fn_name)(*args)
        finally:
            self.release(conn)
