"""When an agent stream reads its cluster's outbox: at once after a commit that wrote messages
for that cluster, and otherwise every safety period.

A commit in this process wakes the streams of the clusters it wrote for (a session event;
never on a rollback). On Postgres a commit in any process does too: the writing transaction
sends `NOTIFY vglobal_outbox, '<cluster id>'` (delivered on commit only, like the rows) and
each server process LISTENs on one connection of its own (`OutboxListener`); the scheduler
running in its own process or another replica's round is then dispatched without waiting for a
poll. While that connection is down notifications may be lost, so streams poll at the short
period, and every stream is woken when it comes back."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)
CHANNEL = "vglobal_outbox"
_CLUSTERS = "outbox_clusters"  # session.info: the clusters this transaction wrote messages for
_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', c) FROM unnest(CAST(:clusters AS text[])) AS c")

_watches: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)
_listening = False  # this process's LISTEN connection is up


def wrote(session: AsyncSession, cluster_ids: Iterable[uuid.UUID]) -> None:
    """The session's transaction writes outbox messages for these clusters."""
    session.info.setdefault(_CLUSTERS, set()).update(cluster_ids)


@contextmanager
def watch(cluster_id: uuid.UUID) -> Iterator[asyncio.Event]:
    """An event set whenever messages for the cluster may have been committed (the stream
    clears it before reading)."""
    woken = asyncio.Event()
    _watches[cluster_id].add(woken)
    try:
        yield woken
    finally:
        _watches[cluster_id].discard(woken)
        if not _watches[cluster_id]:
            del _watches[cluster_id]


def listening() -> bool:
    """Whether commits of other processes wake this process's streams (Postgres, connected)."""
    return _listening


def wake(cluster_ids: Iterable[uuid.UUID] | None = None) -> None:
    """Wake the streams of these clusters (None: every stream)."""
    for cluster_id in list(_watches) if cluster_ids is None else cluster_ids:
        for woken in _watches.get(cluster_id, ()):
            woken.set()


@event.listens_for(Session, "before_commit")
def _notify(session: Session) -> None:
    clusters = session.info.get(_CLUSTERS)
    if clusters and session.get_bind().dialect.name == "postgresql":
        session.execute(_NOTIFY, {"clusters": sorted(str(c) for c in clusters)})


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    clusters = session.info.pop(_CLUSTERS, None)
    if clusters:
        wake(clusters)


@event.listens_for(Session, "after_rollback")
def _rolled_back(session: Session) -> None:
    session.info.pop(_CLUSTERS, None)


class OutboxListener:
    """This process's LISTEN connection (Postgres): a notification wakes its cluster's
    streams. `listen` returns when the connection is lost (the caller starts it again)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def listen(self) -> None:
        global _listening
        lost = asyncio.Event()
        async with self.engine.connect() as connection:
            driver: Any = (await connection.get_raw_connection()).driver_connection
            driver.add_termination_listener(lambda _: lost.set())
            await driver.add_listener(CHANNEL, _notified)
            _listening = True
            wake()  # what was committed while nobody listened
            try:
                while not lost.is_set() and not driver.is_closed():
                    try:  # a lost connection is not always reported: check it now and then
                        await asyncio.wait_for(lost.wait(), timeout=5.0)
                    except TimeoutError:
                        await driver.execute("SELECT 1")
            finally:
                _listening = False
                if driver.is_closed():
                    await connection.invalidate()  # not back into the pool
                else:
                    await driver.remove_listener(CHANNEL, _notified)
        log.warning("outbox notifications: connection lost; streams poll until it is back")


def _notified(_connection: object, _pid: int, _channel: str, payload: str) -> None:
    try:
        wake([uuid.UUID(payload)])
    except ValueError:
        log.warning("outbox notification with an unexpected payload %r", payload)
