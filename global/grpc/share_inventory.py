"""An agent's `ShareInventory` (every share its cluster holds), read into the reconciliation's
terms and handed to it in one transaction; what it decides to cancel at once goes back on the
stream."""

from __future__ import annotations

import logging
import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import transaction
from volcano_global.errors import Invalid
from volcano_global.grpc.stream_guard import require_standing
from volcano_global.rpc.shares import SharePhase
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch.reconcile import Held, reconcile_cluster
from volcano_global.services.inventory import clusters as cluster_service

log = logging.getLogger(__name__)


def held_from(message: pb.ShareInventory) -> list[Held]:
    """The listed shares. One whose placement id is not a UUID was not written by a Global:
    left alone (logged). An unknown or unset phase is refused, naming the entry."""
    held = []
    for index, share in enumerate(message.shares):
        try:
            placement_id = uuid.UUID(share.placement_id)
        except ValueError:
            log.warning("share inventory: %r is not a placement id: ignored", share.placement_id)
            continue
        try:
            phase = SharePhase.from_proto(share.phase)
        except ValueError as exc:
            raise Invalid.one(f"shares.shares[{index}].phase", str(exc)) from None
        held.append(Held(placement_id, phase, share.job_uid))
    return held


async def reconcile_stream(
    sessions: async_sessionmaker[AsyncSession], *, cluster_name: str, message: pb.ShareInventory
) -> list[pb.GlobalMessage]:
    held = held_from(message)  # validated before anything is applied
    async with transaction(sessions) as session:
        # Locked (as an inventory write locks it, before placements): a stream that lost its
        # standing (replaced, token rotated) must not declare the newer stream's shares lost.
        cluster = await cluster_service.lock_cluster(session, name=cluster_name)
        await require_standing(session, cluster)
        done = await reconcile_cluster(session, cluster=cluster, held=held, why=message.reason)
    if done.resent or done.lost or done.cancellations:
        log.info(
            "%s holds %d shares (%s): %d sent again, %d lost, %d cancelled",
            cluster_name,
            len(held),
            message.reason or "?",
            len(done.resent),
            len(done.lost),
            len(done.cancellations),
        )
    return [pb.GlobalMessage(cancellation=c.to_proto()) for c in done.cancellations]
