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
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.services.inventory.clusters import agent_seen, lock_clusters

log = logging.getLogger(__name__)
LONGEST_DELAY_S = 1.0


def delay_for(timeout_s: float) -> float:
    """How long heartbeats wait to be written together: at most a second, and at most a
    twentieth of the silence a cluster is allowed (a test's timeout of 0.6 s waits 30 ms)."""
    return min(LONGEST_DELAY_S, timeout_s / 20)


class HeartbeatWriter:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, delay_s: float) -> None:
        self.sessions = sessions
        self.delay_s = delay_s
        # cluster id -> (name, when its agent was last heard), not written yet
        self._noted: dict[uuid.UUID, tuple[str, datetime]] = {}
        self._flush: asyncio.Task[None] | None = None

    def note(self, cluster_id: uuid.UUID, cluster_name: str) -> None:
        """The cluster's agent was heard now: written with the others within `delay_s`."""
        self._noted[cluster_id] = (cluster_name, utcnow())
        if self._flush is None:
            self._flush = asyncio.create_task(self._flush_later(), name="heartbeat writer")

    async def close(self) -> None:
        """Write what is noted now (the server stops)."""
        if self._flush is not None:
            self._flush.cancel()
            await asyncio.gather(self._flush, return_exceptions=True)
            self._flush = None
        await self._write()

    async def _flush_later(self) -> None:
        """Write what was noted every `delay_s`, until a write leaves nothing noted."""
        while True:
            await asyncio.sleep(self.delay_s)
            await self._write()
            if not self._noted:
                self._flush = None
                return

    async def _write(self) -> None:
        noted, self._noted = self._noted, {}
        if not noted:
            return
        try:
            async with transaction(self.sessions) as session:
                await record_heartbeats(session, noted)
        except Exception as exc:  # the database is away: the next write tries again
            log.warning("agents' heartbeats not written (tried again): %s", exc)
            for cluster_id, seen in noted.items():
                self._noted.setdefault(cluster_id, seen)


async def record_heartbeats(
    session: AsyncSession, noted: dict[uuid.UUID, tuple[str, datetime]]
) -> None:
    """Each noted cluster heard at its time, and Ready (`agent_seen`). The rows are locked in
    name order, as every writer of several clusters' rows takes them; a cluster deleted, or
    registered again under its name, since its stream opened is left alone."""
    names = [name for name, _ in noted.values()]
    for cluster in (await lock_clusters(session, names=names)).values():
        if cluster.id in noted:
            await agent_seen(session, cluster=cluster, at=noted[cluster.id][1])
