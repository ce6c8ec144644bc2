"""Agents' heartbeats, written together: a stream notes its agent's heartbeat and goes on, and
the heartbeats noted within `delay_s` are written in one transaction. One transaction per
heartbeat was 20 a second for 100 agents beating every 5 s, most of an idle Global's CPU.

A heartbeat is liveness, not data: one noted but not written when the process stops is
replaced by the agent's next, and the delay is a small part of the silence a cluster is
allowed (`agents.heartbeat_timeout_s`, see `delay_for`). A write that fails keeps what it
held for the next one."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster
from volcano_global.services.inventory.clusters import agent_seen, lock_clusters

log = logging.getLogger(__name__)
LONGEST_DELAY_S = 1.0


def delay_for(timeout_s: float) -> float:
    """How long heartbeats wait to be written together: at most a second, and at most a
    twentieth of the silence a cluster is allowed (a test's timeout of 0.6 s waits 30 ms)."""
    return min(LONGEST_DELAY_S, timeout_s / 20)


class HeartbeatWriter:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], *, delay_s: float, stale_s: float
    ) -> None:
        """`stale_s`: a heartbeat older than this when its write comes is dropped (the
        cluster's silence has been judged meanwhile; its agent's next heartbeat counts)."""
        self.sessions = sessions
        self.delay_s = delay_s
        self.stale_s = stale_s
        # cluster id -> (name, when its agent was last heard), not written yet
        self._noted: dict[uuid.UUID, tuple[str, datetime]] = {}
        self._flush: asyncio.Task[None] | None = None
        self._writing = False  # the flush task is in a write (not to be cut by `close`)
        self._closed = False

    def note(self, cluster_id: uuid.UUID, cluster_name: str) -> None:
        """The cluster's agent was heard now: written with the others within `delay_s`."""
        if self._closed:  # the server stops: the agent's next heartbeat reaches a live one
            return
        self._noted[cluster_id] = (cluster_name, utcnow())
        if self._flush is None:
            self._flush = asyncio.create_task(self._flush_later(), name="heartbeat writer")

    async def close(self) -> None:
        """Write what is noted now (the server stops): a write under way is waited for, not
        cancelled mid-transaction."""
        self._closed = True
        task, self._flush = self._flush, None
        if task is not None:
            if not self._writing:
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._write()

    async def _flush_later(self) -> None:
        """Write what was noted every `delay_s`, until a write leaves nothing noted."""
        while True:
            await asyncio.sleep(self.delay_s)
            self._writing = True
            try:
                await self._write()
            finally:
                self._writing = False
            if not self._noted or self._closed:
                if self._flush is asyncio.current_task():
                    self._flush = None
                return

    async def _write(self) -> None:
        noted, self._noted = self._noted, {}
        fresh = utcnow() - timedelta(seconds=self.stale_s)
        noted = {key: seen for key, seen in noted.items() if seen[1] >= fresh}
        if not noted:
            return
        try:
            async with transaction(self.sessions) as session:
                busy = await record_heartbeats(session, noted)
        except BaseException as exc:
            self._keep(noted)  # the database is away, or the write was cut: the next tries
            if not isinstance(exc, Exception):
                raise
            log.warning("agents' heartbeats not written (tried again): %s", exc)
            return
        self._keep({key: noted[key] for key in busy})

    def _keep(self, noted: dict[uuid.UUID, tuple[str, datetime]]) -> None:
        for cluster_id, seen in noted.items():
            self._noted.setdefault(cluster_id, seen)


async def record_heartbeats(
    session: AsyncSession, noted: dict[uuid.UUID, tuple[str, datetime]]
) -> set[uuid.UUID]:
    """Each noted cluster heard at its time, and Ready (`agent_seen`); returns those whose
    row another transaction holds (skipped: a snapshot or a round's commit holding one row
    must not hold every cluster's heartbeat; they go in the next write). Rows are taken in
    name order, as every writer of several clusters' rows takes them. A cluster deleted, or
    registered again under its name, since its stream opened is left alone; a heartbeat
    older than the one stored changes nothing."""
    names = [name for name, _ in noted.values()]
    locked = await lock_clusters(session, names=names, skip_locked=True)
    written = set()
    for cluster in locked.values():
        if cluster.id not in noted:
            continue
        written.add(cluster.id)
        at = noted[cluster.id][1]
        if cluster.last_heartbeat_at is None or cluster.last_heartbeat_at < at:
            await agent_seen(session, cluster=cluster, at=at)
    missed = [cluster_id for cluster_id in noted if cluster_id not in written]
    if not missed:
        return set()
    return set(await session.scalars(select(Cluster.id).where(Cluster.id.in_(missed))))
