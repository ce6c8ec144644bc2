"""One scheduler leads among replicas sharing a Postgres; a lone SQLite replica always leads."""

from __future__ import annotations

from volcano_global.db.engine import create_engine
from volcano_global.scheduler.leader import Leadership


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


async def test_sqlite_replica_leads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/x.db")
    try:
        assert await Leadership(engine).acquire() is True
    finally:
        await engine.dispose()
