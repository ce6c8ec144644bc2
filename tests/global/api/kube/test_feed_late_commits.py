"""The change feed behind every watch on Postgres: a change stamped long before it commits (a
transaction that waited, here 1 s against a settle window of 0.1 s) still reaches the watch,
though later-stamped changes were handed on meanwhile."""

from __future__ import annotations

import asyncio

from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker

from tests.conftest import app_settings
from tests.factories import REPLY_S
from volcano_global.app import create_app
from volcano_global.db.base import utcnow
from volcano_global.db.engine import create_engine
from volcano_global.db.models import Queue
from volcano_global.services.kube.cluster_scoped import QUEUE


async def test_a_change_committed_late_is_not_missed(postgres_url: str) -> None:
    from tests.conftest import empty_postgres

    await empty_postgres(postgres_url)
    settings = app_settings(postgres_url, kube={"watch_poll_s": 0.05, "watch_settle_s": 0.1})
    app = create_app(settings)
    engine = create_engine(postgres_url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:
        async with app.router.lifespan_context(app):
            async with sessions() as session, session.begin():
                session.add_all([Queue(name="slow", weight=1), Queue(name="quick", weight=1)])
            created = utcnow()
            feed = app.state.kube_feed
            async with feed.subscribe() as watch:
                await feed.next_read()
                slow = sessions()
                await slow.begin()
                await slow.execute(update(Queue).where(Queue.name == "slow").values(weight=5))
                await asyncio.sleep(0.3)
                async with sessions() as session, session.begin():
                    await session.execute(
                        update(Queue).where(Queue.name == "quick").values(weight=7)
                    )
                await asyncio.sleep(1.0)  # the quick change is handed on, the feed moves on
                await slow.commit()
                await slow.close()
                seen: list[str] = []  # the queues changed after they were made, in order
                while "slow" not in seen:
                    change = await asyncio.wait_for(watch.inbox.get(), timeout=REPLY_S)
                    if change.row.get("kind") == QUEUE and change.row["updated_at"] > created:
                        seen.append(change.row["object"]["metadata"]["name"])
                assert seen == ["quick", "slow"]
    finally:
        await engine.dispose()
