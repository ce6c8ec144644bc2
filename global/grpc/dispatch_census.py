"""Whether anything waits to be sent to a stream's cluster (a dispatch message not yet
acknowledged, a copy to run or stop), read for every open stream of this process at once.
A stream's periodic outbox read, unwoken, asks this first: 100 streams reading their own
outbox and copies every 10 s were 20 transactions a second, nearly all finding nothing."""

from __future__ import annotations

import asyncio
import logging
import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import reading
from volcano_global.grpc.shared_reads import SharedRead
from volcano_global.grpc.stream_guard import open_clusters
from volcano_global.services.data import copies
from volcano_global.services.lifecycle import outbox

log = logging.getLogger(__name__)
_CENSUS: SharedRead[uuid.UUID, bool] = SharedRead()


async def may_wait(
    sessions: async_sessionmaker[AsyncSession], cluster_id: uuid.UUID, *, since: float
) -> bool:
    """Whether something may wait for the cluster, as read after `since` (monotonic). True
    when the shared read failed: the stream reads its own, as it did before."""
    census = _CENSUS.of(
        cluster_id,
        since=since,
        read_all=lambda: _read_all(sessions, open_clusters()),
        alone=_unknown,
    )
    try:
        # Shielded: the read is every stream's; one stream cancelled must not cancel it.
        return await asyncio.shield(census)
    except Exception as exc:  # every stream waits on this read: none must end for it
        log.warning("open streams' dispatch census not read (each reads its own): %s", exc)
        return True


async def _read_all(
    sessions: async_sessionmaker[AsyncSession], cluster_ids: list[uuid.UUID]
) -> dict[uuid.UUID, bool]:
    async with reading(sessions) as session:
        waiting = await outbox.clusters_unacknowledged(session, cluster_ids=cluster_ids)
        waiting |= await copies.clusters_to_send(session, cluster_ids=cluster_ids)
    return {cluster_id: cluster_id in waiting for cluster_id in cluster_ids}


async def _unknown() -> bool:
    """A stream opened after the read began: it reads its own."""
    return True
