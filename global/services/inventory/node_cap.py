"""The cap on the nodes one cluster's inventory holds, over all its messages: a message's own
bound (20,000 nodes) does not stop an agent from growing its cluster delta by delta."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Node
from volcano_global.errors import TooLarge


def require_node_cap(cluster: str, nodes: int, cap: int | None) -> None:
    """Refuse an inventory of `nodes` nodes above `cap` (None: no cap)."""
    if cap is not None and nodes > cap:
        raise TooLarge(
            f"nodes: cluster {cluster!r} would hold {nodes:,} nodes, above the cap of "
            f"{cap:,} nodes per cluster (limits.max_cluster_nodes)"
        )


async def require_room_for(
    session: AsyncSession, *, cluster_id: uuid.UUID, cluster: str, added: int, cap: int | None
) -> None:
    """Refuse `added` new nodes that would take the cluster above `cap` (one count, only when
    nodes are added: most deltas change existing nodes)."""
    if cap is None or added == 0:
        return
    stored = (
        await session.execute(
            select(func.count()).select_from(Node).where(Node.cluster_id == cluster_id)
        )
    ).scalar_one()
    require_node_cap(cluster, stored + added, cap)
