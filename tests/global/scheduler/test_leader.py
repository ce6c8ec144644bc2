"""One scheduler leads among replicas sharing a Postgres; a lone SQLite replica always leads."""

from __future__ import annotations

import gc
import warnings

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from volcano_global.db.engine import create_engine
from volcano_global.scheduler.leader import SCHEDULER_LOCK_KEY, Leadership


async def test_one_replica_leads_on_postgres(postgres_url: str) -> None:
    engines = [create_engine(postgres_url) for _ in range(2)]
    first, second = (Leadership(e) for e in engines)
    try:
        assert await first.acquire() is True
        assert await second.acquire() is False
        assert await first.acquire() is True  # still leading
        await first.release()
        assert await second.acquire() is True  # the other replica takes over
    finally:
        await first.release()
        await second.release()
        for engine in engines:
            await engine.dispose()


async def test_the_lock_is_held_outside_a_transaction(postgres_url: str) -> None:
    """The lock's connection holds the session-level lock, not a transaction: one left open
    for as long as a replica leads shows in every long-transaction alert, holds the vacuum
    horizon back to the last check, and is ended by an `idle_in_transaction_session_timeout`
    (the lock with it)."""
    engine, probe = create_engine(postgres_url), create_engine(postgres_url)
    leadership = Leadership(engine)
    try:
        assert await leadership.acquire() is True
        assert await leadership.acquire() is True  # the check that it still leads
        other = Leadership(probe)
        assert await other.acquire() is False  # the lock is still held
        async with probe.connect() as connection:
            states = (
                await connection.execute(
                    text(
                        "SELECT a.state FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 "
                        "AND l.objid = :key AND a.datname = current_database()"
                    ),
                    {"key": SCHEDULER_LOCK_KEY},
                )
            ).scalars()
            assert list(states) == ["idle"]
    finally:
        await leadership.release()
        await engine.dispose()
        await probe.dispose()


async def test_sqlite_replica_leads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/x.db")
    try:
        assert await Leadership(engine).acquire() is True
    finally:
        await engine.dispose()


class _UnlockFails:
    """The lock's connection, its statements failing from now on (the unlock among them)."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def execute(self, *args: object, **kwargs: object) -> None:
        raise OSError("the unlock did not reach the server")

    async def invalidate(self) -> None:
        await self.connection.invalidate()

    async def close(self) -> None:
        await self.connection.close()


async def test_a_failed_unlock_does_not_pool_the_locked_connection(postgres_url: str) -> None:
    """An unlock that fails on a live connection leaves the session holding the lock: the
    connection is discarded (its session ends, and the lock with it), not put back into the
    pool, where it would keep every replica from leading."""
    engines = [create_engine(postgres_url) for _ in range(2)]
    first, second = (Leadership(e) for e in engines)
    try:
        assert await first.acquire() is True
        assert first._connection is not None
        first._connection = _UnlockFails(first._connection)  # type: ignore[assignment]
        await first.release()
        assert await second.acquire() is True
    finally:
        await second.release()
        for engine in engines:
            await engine.dispose()


async def test_a_failed_try_gives_its_connection_back(postgres_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A try for the lock that fails (the database going away) leaves no connection checked
    out of the pool: the next try has the pool's connections."""
    engine = create_engine(postgres_url)
    leadership = Leadership(engine)

    async def fails(*args: object, **kwargs: object) -> None:
        raise OSError("the connection was lost")

    try:
        with warnings.catch_warnings(record=True) as caught, monkeypatch.context() as patched:
            warnings.simplefilter("always")
            patched.setattr(AsyncConnection, "execute", fails)
            with pytest.raises(OSError):
                await leadership.acquire()
            gc.collect()
        # Dropped, the connection would be collected back into the pool with a warning.
        assert not [w for w in caught if "non-checked-in" in str(w.message)]
        assert engine.sync_engine.pool.checkedout() == 0
        assert await leadership.acquire() is True
    finally:
        await leadership.release()
        await engine.dispose()
