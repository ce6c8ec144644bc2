"""SQLite's checkpoints in a thread of their own (db/checkpoints.py): the log reaches the
database file while the server's connection only writes, and a server on an SQLite file runs
the thread while it serves."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

from sqlalchemy import text

from volcano_global.app import _database
from volcano_global.db.checkpoints import (
    BACKSTOP_PAGES,
    LOG_SIZE_LIMIT,
    Checkpointer,
    sqlite_file,
)
from volcano_global.db.engine import create_engine
from volcano_global.settings import Settings

ROWS = 4_000  # ~1,340 pages of 1 KiB rows: past SQLite's default checkpoint, short of the backstop


def test_sqlite_file_is_the_path_of_a_file_database() -> None:
    assert sqlite_file("sqlite+aiosqlite:///data/v.db") == os.path.abspath("data/v.db")
    assert sqlite_file("sqlite+aiosqlite:///./v.db?uri=false") == os.path.abspath("v.db")
    assert sqlite_file("sqlite+aiosqlite:////abs/v.db") == "/abs/v.db"
    assert sqlite_file("sqlite+aiosqlite://") is None
    assert sqlite_file("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_file("sqlite+aiosqlite:///file:mem?mode=memory&cache=shared&uri=true") is None
    assert sqlite_file("postgresql+asyncpg://postgres@127.0.0.1/test") is None


def _rows_in_file_alone(path: Path, copy: Path) -> int:
    """How many rows the database file holds without its log: what checkpoints copied (0 for
    a copy taken while a checkpoint was writing the file, which may be torn)."""
    shutil.copyfile(path, copy)
    connection = sqlite3.connect(copy)
    try:
        names = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
        return connection.execute("SELECT count(*) FROM t").fetchone()[0] if "t" in names else 0
    except sqlite3.DatabaseError:
        return 0
    finally:
        connection.close()


async def test_the_log_reaches_the_file_through_the_background_thread(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}", background_checkpoints=True)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
            await connection.execute(
                text("INSERT INTO t (v) VALUES (:v)"), [{"v": "x" * 1000}] * ROWS
            )
        async with engine.connect() as connection:
            pages = (await connection.execute(text("PRAGMA wal_autocheckpoint"))).scalar()
        assert pages == BACKSTOP_PAGES
        # The engine's connection only wrote the log (past SQLite's default checkpoint, short
        # of the backstop): nothing in the file yet.
        assert _rows_in_file_alone(path, tmp_path / "copy.db") == 0
        checkpointer = Checkpointer(str(path), period_s=0.05)
        checkpointer.start()
        try:
            deadline = time.monotonic() + 30
            while _rows_in_file_alone(path, tmp_path / "copy.db") < ROWS:
                assert time.monotonic() < deadline, "the background checkpoints copied nothing"
                await asyncio.sleep(0.05)
        finally:
            checkpointer.stop()
        assert _rows_in_file_alone(path, tmp_path / "copy.db") == ROWS  # the thread has stopped
        assert checkpointer.copied_pages >= ROWS // 4
        assert not checkpointer._thread.is_alive()
    finally:
        await engine.dispose()


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sqlite-checkpoints"]


async def test_the_server_checkpoints_its_sqlite_file_in_the_background(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'g.db'}")
    before = set(_checkpoint_threads())
    async with _database(settings) as engine:
        started = set(_checkpoint_threads()) - before
        assert len(started) == 1
        async with engine.connect() as connection:
            pages = (await connection.execute(text("PRAGMA wal_autocheckpoint"))).scalar()
            cache = (await connection.execute(text("PRAGMA cache_size"))).scalar()
            limit = (await connection.execute(text("PRAGMA journal_size_limit"))).scalar()
        assert pages == BACKSTOP_PAGES
        assert limit == LOG_SIZE_LIMIT
        assert cache == -65536  # KiB: 64 MiB of pages
    assert not any(t.is_alive() for t in started)
