"""The change feed behind every kubectl watch runs as the named background loop
"kube-change-feed" (SQLite and Postgres): run a few iterations, and an open watch is handed a
queue made and then deleted between them, once each; the loop pauses its period between
reads (pauses recorded, not slept)."""

from __future__ import annotations

from sqlalchemy import delete

from volcano_global.background import kube_change_feed, run_guarded
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Queue
from volcano_global.services.kube.cluster_scoped import QUEUE
from volcano_global.services.kube.feed import Change, ChangeFeed, Subscription


def queue_changes(watch: Subscription) -> list[tuple[str, bool]]:
    """(name, deleted) of the queue changes the watch holds, in order."""
    found: list[Change | None] = []
    while not watch.inbox.empty():
        found.append(watch.inbox.get_nowait())
    return [
        (c.row["object"]["metadata"]["name"], c.row["deleted"])
        for c in found
        if c is not None and c.row.get("kind") == QUEUE
    ]


async def test_the_feed_loop_hands_each_change_to_an_open_watch_once(database_url: str) -> None:
    engine = create_engine(database_url)
    sessions = create_session_factory(engine)
    feed = ChangeFeed(sessions, poll_s=0.25, settle_s=0.1)
    loop = kube_change_feed(feed)
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    try:
        async with feed.subscribe() as watch:
            await run_guarded(loop, sleep=sleep, iterations=1)  # starts from the newest change
            assert queue_changes(watch) == []
            async with transaction(sessions) as session:
                session.add(Queue(name="research", weight=1))
            await run_guarded(loop, sleep=sleep, iterations=2)
            assert queue_changes(watch) == [("research", False)]  # the second read: not again
            async with transaction(sessions) as session:
                await session.execute(delete(Queue).where(Queue.name == "research"))
            await run_guarded(loop, sleep=sleep, iterations=1)
            assert queue_changes(watch) == [("research", True)]
        assert pauses == [0.25] * 4
    finally:
        await engine.dispose()
