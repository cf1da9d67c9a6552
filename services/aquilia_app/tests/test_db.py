"""SQLitePool: group-committed writes through one writer, lazily taken readers, the acquire timeout."""
import asyncio
import sqlite3

import pytest

from aquilia_app.db import PoolTimeout, SQLitePool

SCHEMA = "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)"


async def _pool(path, size=2, timeout=5.0) -> SQLitePool:
    pool = await SQLitePool(str(path), size, acquire_timeout=timeout).open()
    await pool.run("executescript", SCHEMA)
    return pool


def _rows(path) -> list[str]:
    with sqlite3.connect(path) as raw:
        return [r[0] for r in raw.execute("SELECT name FROM t ORDER BY id")]


def test_concurrent_writes_are_all_committed_with_their_own_rowids(tmp_path):
    async def main():
        pool = await _pool(tmp_path / "db")
        conn = await pool.acquire()
        results = await asyncio.gather(*(conn.execute("INSERT INTO t (name) VALUES (?)", (f"n{i}",))
                                         for i in range(300)))
        pool.release(conn)
        await pool.close()
        return results

    results = asyncio.run(main())
    assert all(count == 1 for count, _ in results)
    assert len({rowid for _, rowid in results}) == 300
    assert sorted(_rows(tmp_path / "db")) == sorted(f"n{i}" for i in range(300))


def test_writes_made_before_the_batch_runs_share_its_commit(tmp_path):
    """A write submitted after the first one's batch was scheduled, but before it ran, is committed in that
    same transaction: the batch takes the queue when it runs."""
    async def main():
        pool = await _pool(tmp_path / "db")
        transactions = []
        pool.writer._raw.set_trace_callback(lambda sql: transactions.append(sql) if sql.startswith("BEGIN") else None)
        conn = await pool.acquire()
        loop = asyncio.get_running_loop()
        later = loop.create_future()
        # Due before the batch that the first write schedules, as another request task's step would be.
        loop.call_soon(lambda: later.set_result(conn.execute("INSERT INTO t (name) VALUES (?)", ("second",))))
        first = conn.execute("INSERT INTO t (name) VALUES (?)", ("first",))  # schedules the batch
        results = await asyncio.gather(first, await later)
        pool.release(conn)
        await pool.close()
        return results, transactions

    results, transactions = asyncio.run(main())
    assert [count for count, _ in results] == [1, 1]
    assert len(transactions) == 1, transactions
    assert _rows(tmp_path / "db") == ["first", "second"]


def test_a_failing_write_fails_alone_and_the_others_of_its_batch_are_kept(tmp_path):
    async def main():
        pool = await _pool(tmp_path / "db")
        conn = await pool.acquire()
        await conn.execute("INSERT INTO t (name) VALUES (?)", ("taken",))
        names = [f"a{i}" for i in range(50)] + ["taken"] + [f"b{i}" for i in range(50)]
        outcomes = await asyncio.gather(*(conn.execute("INSERT INTO t (name) VALUES (?)", (n,)) for n in names),
                                        return_exceptions=True)
        pool.release(conn)
        await pool.close()
        return names, outcomes

    names, outcomes = asyncio.run(main())
    failed = [n for n, o in zip(names, outcomes) if isinstance(o, BaseException)]
    assert failed == ["taken"]
    assert isinstance(outcomes[names.index("taken")], sqlite3.IntegrityError)
    assert sorted(_rows(tmp_path / "db")) == sorted(set(names))


def test_a_malformed_statement_is_the_callers_error(tmp_path):
    async def main():
        pool = await _pool(tmp_path / "db")
        conn = await pool.acquire()
        with pytest.raises(sqlite3.OperationalError):
            await conn.execute("INSERT INTO nowhere (x) VALUES (?)", (1,))
        ok = await conn.execute("INSERT INTO t (name) VALUES (?)", ("after",))
        pool.release(conn)
        await pool.close()
        return ok

    assert asyncio.run(main())[0] == 1
    assert _rows(tmp_path / "db") == ["after"]


def test_writes_do_not_wait_for_the_readers_of_a_full_pool(tmp_path):
    async def main():
        pool = await _pool(tmp_path / "db", size=1, timeout=0.2)
        reader = await pool.acquire()
        await reader.fetchone("SELECT 1 AS n")  # takes the pool's only reading connection
        writer = await pool.acquire()
        count, _ = await asyncio.wait_for(writer.execute("INSERT INTO t (name) VALUES (?)", ("w",)), 2)
        with pytest.raises(PoolTimeout):
            await writer.fetchone("SELECT 1 AS n")  # a read still needs a free connection
        pool.release(reader)
        row = await writer.fetchone("SELECT name FROM t")  # free again: the read goes through
        pool.release(writer)
        await pool.close()
        return count, row

    assert asyncio.run(main()) == (1, {"name": "w"})


def test_close_waits_for_writes_in_flight(tmp_path):
    async def main():
        pool = await _pool(tmp_path / "db")
        conn = await pool.acquire()
        pending = [conn.execute("INSERT INTO t (name) VALUES (?)", (f"n{i}",)) for i in range(100)]
        await pool.close()
        return await asyncio.gather(*pending)

    assert len(asyncio.run(main())) == 100
    assert len(_rows(tmp_path / "db")) == 100


def test_release_gives_back_a_reader_once(tmp_path):
    async def main():
        pool = await _pool(tmp_path / "db", size=1, timeout=0.2)
        conn = await pool.acquire()
        await asyncio.gather(conn.fetchone("SELECT 1 AS n"), conn.fetchone("SELECT 2 AS n"))
        pool.release(conn)
        pool.release(conn)  # twice: harmless
        again = await pool.acquire()
        row = await again.fetchone("SELECT 3 AS n")
        pool.release(again)
        idle = pool._idle.qsize()
        await pool.close()
        return row, idle

    assert asyncio.run(main()) == ({"n": 3}, 1)


def test_a_write_lock_held_elsewhere_is_waited_for_off_the_event_loop(tmp_path):
    """Another process's write transaction: the batch waits for it in a thread while the loop keeps
    running, then commits."""
    import threading
    import time

    async def main():
        pool = await _pool(tmp_path / "db")
        other = sqlite3.connect(tmp_path / "db", check_same_thread=False, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # holds the write lock, as a second worker would
        release = threading.Timer(0.4, lambda: other.execute("COMMIT"))
        release.start()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        conn = await pool.acquire()
        t0 = time.monotonic()
        result = await conn.execute("INSERT INTO t (name) VALUES (?)", ("after the lock",))
        waited = time.monotonic() - t0
        tick_task.cancel()
        release.join()
        other.close()
        pool.release(conn)
        await pool.close()
        return result, waited, ticks

    (count, _), waited, ticks = asyncio.run(main())
    assert count == 1 and waited >= 0.3
    assert ticks >= 15  # the loop ran on while the write waited
    assert _rows(tmp_path / "db") == ["after the lock"]


@pytest.mark.parametrize("inline", [True, False])
def test_the_wal_is_checkpointed_as_writes_go_on(tmp_path, inline):
    path = tmp_path / "db"

    async def main():
        pool = await SQLitePool(str(path), 2, inline_writes=inline).open()
        await pool.run("executescript", "CREATE TABLE big (id INTEGER PRIMARY KEY, data BLOB)")
        conn = await pool.acquire()
        blob = b"x" * 2000
        wal = path.with_name(path.name + "-wal")
        for _ in range(10):  # 10 rounds of 1,000 rows of 2 KB: 20 MB written in all
            await asyncio.gather(*(conn.execute("INSERT INTO big (data) VALUES (?)", (blob,)) for _ in range(1000)))
            await pool.writer.wait_idle()  # the round's checkpoint, if one started, is done
        size = wal.stat().st_size  # before closing: the last connection to close checkpoints anyway
        pool.release(conn)
        await pool.close()
        return size

    assert asyncio.run(main()) < 12 << 20
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM big").fetchone()[0] == 10_000


def test_the_wal_restarts_while_writes_keep_coming(tmp_path):
    # A checkpoint that runs beside the writer never catches up with it: the WAL is only rewound from its
    # start once every frame in it is checkpointed, so with writes arriving all the time it grew without end
    # (245 MB for an 8 MB database after 600,000 POST /items).
    path = tmp_path / "db"

    async def main():
        pool = await SQLitePool(str(path), 2).open()
        await pool.run("executescript", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn = await pool.acquire()
        wal = path.with_name(path.name + "-wal")
        largest = 0

        async def client(n):
            nonlocal largest
            for i in range(n):
                await conn.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
                largest = max(largest, wal.stat().st_size)

        await asyncio.gather(*(client(2500) for _ in range(8)))  # ~2,500 commits of ~8 rows, never idle
        pool.release(conn)
        await pool.close()
        return largest

    largest = asyncio.run(main())
    assert largest < 2 << 20, f"the WAL reached {largest:,} bytes"
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 20_000
