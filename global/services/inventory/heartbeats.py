"""Agent silence: clusters whose agent stopped talking become NotReady.

Silence is judged only over time this replica was listening with its database reachable (as
Kubernetes' node lifecycle controller counts from its own observations after a restart). A
Global that was down, or could not record heartbeats, for longer than the timeout would
otherwise come back and find every cluster "silent" - and requeue every running job - although
the agents were only waiting for it."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, ClusterState, EventType
from volcano_global.services.events import record_event


async def mark_unresponsive(
    session: AsyncSession, *, timeout_s: float, listening_since: datetime
) -> list[str]:
    """Clusters whose agent has been silent longer than the timeout, all of it while we were
    listening, become NotReady (with a Warning event). Safe to run on every replica: rows are
    claimed with SKIP LOCKED."""
    cutoff = utcnow() - timedelta(seconds=timeout_s)
    if listening_since > cutoff:
        return []  # not listening long enough to call anyone silent
    stale = (
        (
            await session.execute(
                select(Cluster)
                .where(Cluster.state == ClusterState.READY, Cluster.last_heartbeat_at < cutoff)
                .with_for_update(skip_locked=True)
            )
        )
        .scalars()
        .all()
    )
    for cluster in stale:
        cluster.state = ClusterState.NOT_READY
        await record_event(
            session,
            cluster_id=cluster.id,
            type=EventType.WARNING,
            reason="NotReady",
            message=f"no heartbeat from the agent for more than {timeout_s:g} s",
        )
    await session.flush()
    return [c.name for c in stale]


class HeartbeatMonitor:
    """One replica's periodic check. Listening starts when the monitor is made (with the
    agent port) and starts over whenever a check cannot reach the database."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, timeout_s: float) -> None:
        self.sessions = sessions
        self.timeout_s = timeout_s
        self.listening_since = utcnow()

    async def check(self) -> list[str]:
        """The names of the clusters just marked NotReady."""
        try:
            async with transaction(self.sessions) as session:
                return await mark_unresponsive(
                    session, timeout_s=self.timeout_s, listening_since=self.listening_since
                )
        except Exception:
            self.listening_since = utcnow()  # heartbeats may have gone unrecorded meanwhile
            raise
