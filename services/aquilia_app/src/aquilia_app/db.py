"""A small async-friendly SQLite pool: N sqlite3 connections, each used by one thread at a time.

``await pool.acquire()`` hands out a :class:`Connection` (an ``asyncio.Queue`` of idle connections);
its reads run the sqlite3 call in the pool's own ``ThreadPoolExecutor`` so the event loop never
waits for the disk or a lock.  WAL mode lets readers run beside a writer.  A caller waits at most
``acquire_timeout`` seconds for a connection, then gets :class:`PoolTimeout` (a 503 with
``Retry-After``), so a pool held by slow requests cannot leave others waiting forever.

Writes (``Connection.execute``) all go through one more connection, the pool's :class:`_Writer`,
with group commit: SQLite admits one writer at a time, and several connections writing at once
only queue on its lock through the busy handler's sleeps (1 ms, 2 ms, 5 ms, ...).  The writer runs
the writes that arrived while its previous batch ran in one transaction, one thread hop and one
commit, and answers each caller only after that commit.  Short writes run on the event loop
thread by default, with everything that could make them wait sent to the executor (see _Writer);
``SQLitePool(inline_writes=False)`` runs every write in the executor, for apps whose writes are long.  A statement that fails in a batch rolls
the batch back; its statements are then run again one transaction each, so every caller gets the
outcome its statement alone would have had.
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .exceptions import ServiceUnavailable

__all__ = ["SQLitePool", "Connection", "PoolTimeout", "connect_wal", "prepare_database"]

log = logging.getLogger("aquilia_app")

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
    """A caller's handle on the pool.  Its first read takes an idle sqlite3 connection (waiting at most
    the pool's ``acquire_timeout``) and keeps it until ``pool.release``; writes go to the pool's writer
    and never take one, so a burst of writes is not capped at the pool's size."""

    __slots__ = ("_raw", "_pool", "_taking")

    def __init__(self, pool: "SQLitePool"):
        self._raw: sqlite3.Connection | None = None
        self._pool = pool
        self._taking: list[asyncio.Future] | None = None  # reads of this handle waiting for its first take

    async def _reader(self) -> sqlite3.Connection:
        if self._raw is not None:
            return self._raw
        if self._taking is not None:  # a concurrent read of this handle is taking one: share it
            waiter = asyncio.get_running_loop().create_future()
            self._taking.append(waiter)
            await waiter
            return self._raw
        self._taking = waiters = []
        try:
            self._raw = await self._pool._take()
        except BaseException as e:
            for w in waiters:
                if not w.done():
                    w.set_exception(e) if isinstance(e, Exception) else w.cancel()
            raise
        finally:
            self._taking = None
        for w in waiters:
            if not w.done():
                w.set_result(None)
        return self._raw

    def _run(self, fn, *args):
        return asyncio.get_running_loop().run_in_executor(self._pool._executor, fn, *args)

    async def fetchall(self, sql: str, params: tuple = ()) -> list[dict]:
        raw = await self._reader()

        def work():
            cur = raw.execute(sql, params)
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, row)) for row in cur.fetchall()]
        return await self._run(work)

    async def fetchone(self, sql: str, params: tuple = ()) -> dict | None:
        raw = await self._reader()

        def work():
            cur = raw.execute(sql, params)
            row = cur.fetchone()
            return None if row is None else dict(zip([d[0] for d in cur.description], row))
        return await self._run(work)

    def execute(self, sql: str, params: tuple = ()) -> "asyncio.Future[tuple[int, int | None]]":
        """Run one write statement; resolves to (rowcount, lastrowid) once it is committed."""
        return self._pool.writer.submit(sql, params)

    async def executescript(self, script: str) -> None:
        await self._run((await self._reader()).executescript, script)


class _Writer:
    """The pool's one writing connection, committing the writes that queue up in batches.

    Batches are started from the event loop only (``submit`` and the previous batch's completion),
    so the queue needs no lock.  With ``inline`` (the default) a batch runs on the event loop thread:
    a short write in WAL mode (no fsync at commit with synchronous=NORMAL) costs less there than the
    two thread hand-offs around it.  What could make it wait never runs there: the connection's busy
    timeout is 0, so a write lock held by another process fails the batch at once and the batch is
    run again in the executor, where it waits; a failing statement is sorted out there too; and the
    automatic checkpoint (which copies pages and syncs the file) is off, replaced by a checkpoint in
    the executor every CHECKPOINT_EVERY committed writes.  Without ``inline`` every batch runs in the
    executor.

    SQLite rewinds the WAL to its start only when every frame in it has been checkpointed, so a
    checkpoint that only ever runs beside the writer never catches up with it, and the WAL grows
    without end (it reached 245 MB beside an 8 MB database after 600,000 inserts).  The checkpoint
    therefore has two steps: a PASSIVE one beside the writer copies the bulk and syncs the files, then
    the writes that arrive wait while a RESTART one copies the few frames written meanwhile, a much
    shorter wait than for the whole checkpoint.  RESTART also waits for
    other processes' writers and for readers of older snapshots, so several workers sharing the file
    cannot starve it either.  The first batch after it runs in the executor: that write rewinds the
    WAL, and SQLite syncs the WAL's new header then (an fsync), which must not stall the loop.
    """

    CHECKPOINT_EVERY = 1000  # committed writes between checkpoints (SQLite's default: 1000 pages)

    def __init__(self, raw: sqlite3.Connection, executor: ThreadPoolExecutor, path: str, inline: bool):
        raw.isolation_level = None  # transactions are this class's own BEGIN/COMMIT
        if inline:
            raw.execute("PRAGMA busy_timeout=0")
            raw.execute("PRAGMA wal_autocheckpoint=0")
        self._raw = raw
        self._executor = executor
        self._path = path
        self._inline = inline
        self._queue: list[tuple[str, tuple, asyncio.Future]] = []
        self._running = False
        self._idle_waiters: list[asyncio.Future] = []
        self._since_checkpoint = 0
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpointing: asyncio.Future | None = None
        self._holding = False  # the checkpoint's second step runs: batches wait for its end
        self._rewinding = False  # a checkpoint ended: the next batch rewinds the WAL, in the executor

    def submit(self, sql: str, params: tuple) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.append((sql, params, fut))
        if not self._running and not self._holding:
            self._start(loop)
        return fut

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._running = True
        if self._inline and not self._rewinding:  # after the callbacks already due: their writes join
            loop.call_soon(self._run_inline, loop)
        else:
            self._rewinding = False
            batch, self._queue = self._queue, []
            self._run_in_thread(loop, batch, [(sql, params) for sql, params, _ in batch])

    def _run_inline(self, loop) -> None:
        # The batch is taken now, not when it was scheduled: with 50 clients posting, that doubles the
        # writes per commit (9 -> 17 on average) and cuts the CPU time of a POST /items by about 6 %.
        if self._holding:  # the checkpoint's end starts this batch
            self._running = False
            return
        batch, self._queue = self._queue, []
        statements = [(sql, params) for sql, params, _ in batch]
        try:
            results = self._transaction(statements)
        except Exception:  # locked by another process, or a statement failed: in a thread, which may wait
            self._run_in_thread(loop, batch, statements)
            return
        self._since_checkpoint += len(statements)
        if self._since_checkpoint >= self.CHECKPOINT_EVERY and self._checkpointing is None:
            self._since_checkpoint = 0
            self._checkpoint_step(loop, "PASSIVE")
        self._deliver(loop, batch, [(True, r) for r in results])

    def _run_in_thread(self, loop, batch, statements) -> None:
        done = loop.run_in_executor(self._executor, self._commit_waiting, statements)
        done.add_done_callback(lambda f: self._finished(loop, batch, f))

    def _finished(self, loop, batch, done: asyncio.Future) -> None:
        if done.cancelled():  # the loop is closing: nothing can be answered any more
            self._running = False
            return
        exc = done.exception()
        self._deliver(loop, batch, [(False, exc)] * len(batch) if exc is not None else done.result())

    def _deliver(self, loop, batch, outcomes) -> None:
        self._running = False
        for (_, _, fut), (ok, value) in zip(batch, outcomes):
            if not fut.done():  # a caller that stopped waiting (cancelled) is skipped
                fut.set_result(value) if ok else fut.set_exception(value)
        if self._queue:
            if not self._holding:  # else the checkpoint's end starts the batch
                self._start(loop)
            return
        for waiter in self._idle_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._idle_waiters.clear()

    async def wait_idle(self) -> None:
        """Return once every submitted write is answered and no checkpoint runs (before closing)."""
        while self._running or self._queue or self._checkpointing is not None:
            if self._checkpointing is not None:
                await asyncio.wait((self._checkpointing,))
            else:
                waiter = asyncio.get_running_loop().create_future()
                self._idle_waiters.append(waiter)
                await waiter

    def _checkpoint_step(self, loop: asyncio.AbstractEventLoop, mode: str) -> None:
        self._checkpointing = loop.run_in_executor(self._executor, self._checkpoint, mode)
        self._checkpointing.add_done_callback(lambda done: self._checkpointed(loop, mode, done))

    def _checkpoint(self, mode: str) -> None:
        """In the executor, on a connection of its own (with the busy timeout): copy the WAL's frames into
        the database file; RESTART also waits until the next write can start the WAL from its beginning."""
        if self._checkpointer is None:
            self._checkpointer = connect_wal(self._path)
        self._checkpointer.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()

    def _checkpointed(self, loop: asyncio.AbstractEventLoop, mode: str, done: asyncio.Future) -> None:
        self._checkpointing = None
        if done.cancelled():  # the loop is closing
            return
        if done.exception() is not None:
            log.warning("WAL checkpoint failed: %s", done.exception())
        elif mode == "PASSIVE":  # caught up but for the latest writes: the next ones wait for the rest
            self._holding = True
            self._checkpoint_step(loop, "RESTART")
            return
        else:
            self._rewinding = True
        self._holding = False
        if self._queue and not self._running:
            self._start(loop)

    def _commit_waiting(self, statements: list[tuple[str, tuple]]) -> list[tuple[bool, Any]]:
        """In the executor: ``_commit``, waiting for another process's write lock as long as the busy
        timeout allows (the inline connection's own timeout is 0)."""
        if not self._inline:
            return self._commit(statements)
        self._raw.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        try:
            return self._commit(statements)
        finally:
            self._raw.execute("PRAGMA busy_timeout=0")

    def _commit(self, statements: list[tuple[str, tuple]]) -> list[tuple[bool, Any]]:
        """In the executor: every statement in one transaction, or, if one fails, each in its own."""
        if len(statements) > 1:
            try:
                return [(True, r) for r in self._transaction(statements)]
            except Exception:
                pass  # rolled back: find out which statement failed, one transaction each
        outcomes = []
        for st in statements:
            try:
                outcomes.append((True, self._transaction([st])[0]))
            except Exception as e:
                outcomes.append((False, e))
        return outcomes

    def _transaction(self, statements: list[tuple[str, tuple]]) -> list[tuple[int, int | None]]:
        raw = self._raw
        raw.execute("BEGIN IMMEDIATE")
        try:
            results = []
            for sql, params in statements:
                cur = raw.execute(sql, params)
                results.append((cur.rowcount, cur.lastrowid))
            raw.execute("COMMIT")
            return results
        except BaseException:
            if raw.in_transaction:
                raw.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._raw.close()
        if self._checkpointer is not None:
            self._checkpointer.close()


class SQLitePool:
    def __init__(self, path: str, size: int = 4, acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT,
                 inline_writes: bool = True):
        if size < 1:
            raise ValueError("pool size must be >= 1")
        if not acquire_timeout > 0:
            raise ValueError("acquire_timeout must be > 0 seconds")
        self.path = path
        self.size = size
        self.acquire_timeout = acquire_timeout
        self.inline_writes = inline_writes  # short writes on the loop thread (see _Writer); False: long writes
        self._executor = ThreadPoolExecutor(max_workers=size + 1, thread_name_prefix="sqlite")  # + the writer
        self._idle: asyncio.Queue | None = None
        self._all: list[sqlite3.Connection] = []
        self.writer: _Writer | None = None

    async def open(self) -> "SQLitePool":
        loop = asyncio.get_running_loop()

        def connect():
            return connect_wal(self.path)

        self._idle = asyncio.Queue()
        for _ in range(self.size):
            raw = await loop.run_in_executor(self._executor, connect)
            self._all.append(raw)
            self._idle.put_nowait(raw)
        self.writer = _Writer(await loop.run_in_executor(self._executor, connect), self._executor, self.path,
                              self.inline_writes)
        return self

    async def acquire(self) -> Connection:
        """A handle for one caller (a request); give it back with ``release``."""
        return Connection(self)

    async def _take(self) -> sqlite3.Connection:
        idle = self._idle
        if not idle.empty():  # the common case: no timer armed
            return idle.get_nowait()
        try:
            async with asyncio.timeout(self.acquire_timeout):
                return await idle.get()
        except TimeoutError:
            raise PoolTimeout(self.acquire_timeout) from None

    def release(self, conn: Connection) -> None:
        raw, conn._raw = conn._raw, None
        if raw is not None:
            self._idle.put_nowait(raw)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for raw in self._all:
            await loop.run_in_executor(self._executor, raw.close)
        self._all.clear()
        if self.writer is not None:
            await self.writer.wait_idle()
            await loop.run_in_executor(self._executor, self.writer.close)
            self.writer = None
        self._executor.shutdown(wait=False)

    async def run(self, fn_name: str, *args: Any):
        conn = await self.acquire()
        try:
            return await getattr(conn, fn_name)(*args)
        finally:
            self.release(conn)
