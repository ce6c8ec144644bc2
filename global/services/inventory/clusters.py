"""Member clusters: registration, lookup, deletion and agent tokens."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import raiseload

from volcano_global.db.base import utcnow
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    ClusterState,
    Job,
    NodeUse,
    Placement,
    TokenRole,
)
from volcano_global.db.models.placements import HOLDING
from volcano_global.errors import Conflict, NotFound
from volcano_global.services.events import record_event
from volcano_global.services.inventory import node_cache
from volcano_global.services.inventory.agent_streams import streams_must_recheck
from volcano_global.services.tenancy.tokens import issue_token, revoke_cluster_tokens


async def register_cluster(
    session: AsyncSession, *, name: str, description: str, labels: dict[str, str]
) -> tuple[Cluster, str]:
    """Register a cluster; returns it with its agent token (shown only now)."""
    if await _find(session, name) is not None:
        raise Conflict(f"cluster {name!r} already exists")
    cluster = Cluster(name=name, description=description, labels=labels, capacities=[])
    session.add(cluster)
    await session.flush()
    token = issue_token(session, name=f"agent:{name}", role=TokenRole.AGENT, cluster_id=cluster.id)
    await record_event(
        session, cluster_id=cluster.id, reason="Registered", message=f"cluster {name} registered"
    )
    return cluster, token


async def rotate_agent_token(session: AsyncSession, *, name: str) -> str:
    """Revoke the cluster's agent tokens and issue a new one."""
    cluster = await get_cluster(session, name=name)
    await revoke_cluster_tokens(session, cluster_id=cluster.id)
    streams_must_recheck(session, cluster.id)  # the stream open with the old token ends
    token = issue_token(session, name=f"agent:{name}", role=TokenRole.AGENT, cluster_id=cluster.id)
    await record_event(
        session, cluster_id=cluster.id, reason="TokenRotated", message="agent token rotated"
    )
    return token


async def agent_seen(
    session: AsyncSession, *, cluster: Cluster, connected: bool = False, at: datetime | None = None
) -> None:
    """An agent connected or sent a heartbeat (`at`, default now): the cluster is Ready."""
    cluster.last_heartbeat_at = at or utcnow()
    if cluster.state is not ClusterState.READY:
        previous = cluster.state
        cluster.state = ClusterState.READY
        await record_event(
            session,
            cluster_id=cluster.id,
            reason="Ready",
            message=f"agent {'connected' if connected else 'heartbeat'}; was {previous.value}",
        )


async def get_cluster(session: AsyncSession, *, name: str) -> Cluster:
    cluster = await _find(session, name)
    if cluster is None:
        raise NotFound(f"cluster {name!r} not found")
    return cluster


async def get_cluster_id(session: AsyncSession, *, name: str) -> uuid.UUID:
    """The cluster's id, read alone (no row loaded): what authorising a caller needs."""
    found = await session.scalar(select(Cluster.id).where(Cluster.name == name))
    if found is None:
        raise NotFound(f"cluster {name!r} not found")
    return found


async def lock_cluster(
    session: AsyncSession, *, name: str, cluster_id: uuid.UUID | None = None
) -> Cluster:
    """The cluster row, locked for the transaction (Postgres; SQLite has one writer anyway):
    inventory messages of one cluster apply one at a time, whichever replica holds the stream.
    FOR NO KEY UPDATE, not FOR UPDATE: rows that reference the cluster (dispatch messages,
    events) can still be written meanwhile, so a report that holds a placement and writes its
    cancellations does not wait on a reconciliation that waits on that placement (deadlock).
    With `cluster_id` (read before, to authorise the caller), the row of that id: a cluster
    deleted and registered again under its name meanwhile is not it. Read under the lock, the
    row's columns are current (a counter bumped from an older read would lose an update)."""
    which = Cluster.id == cluster_id if cluster_id is not None else Cluster.name == name
    cluster = (
        await session.execute(
            select(Cluster)
            .where(which)
            .options(raiseload(Cluster.capacities))  # one read fewer; refresh it if needed
            .with_for_update(key_share=True)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if cluster is None:
        raise NotFound(f"cluster {name!r} not found")
    return cluster


async def lock_clusters(
    session: AsyncSession, *, names: list[str], skip_locked: bool = False
) -> dict[str, Cluster]:
    """The clusters' rows that exist, by name, locked as `lock_cluster` locks one, in name
    order: every transaction that locks several clusters' rows takes them in this order (the
    scheduler's round commit too), so two of them never wait on each other. `skip_locked`:
    rows another transaction holds are left out (Postgres; SQLite has one writer)."""
    rows = await session.execute(
        select(Cluster)
        .where(Cluster.name.in_(sorted(set(names))))
        .order_by(Cluster.name)  # Postgres locks the rows as the sort returns them
        .options(raiseload(Cluster.capacities))
        .with_for_update(key_share=True, skip_locked=skip_locked)
        .execution_options(populate_existing=True)
    )
    return {cluster.name: cluster for cluster in rows.scalars()}


async def delete_cluster(session: AsyncSession, *, name: str) -> None:
    """Delete the cluster, its row locked first (FOR UPDATE, what the DELETE takes): the ORM
    deletes its capacity rows before the row, so without it the deletion could hold those
    while waiting for a delta that holds the row and updates them (deadlock). The API's
    route stops the cluster's copies (jobs, then copies locked) before this: the row comes
    after them, as before."""
    cluster = (
        await session.execute(
            select(Cluster)
            .where(Cluster.name == name)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if cluster is None:
        raise NotFound(f"cluster {name!r} not found")
    await require_no_active_shares(session, cluster)
    await session.delete(cluster)
    await session.execute(delete(NodeUse).where(NodeUse.cluster_id == cluster.id))
    streams_must_recheck(session, cluster.id)
    node_cache.forget(session, cluster.id)
    await session.flush()


async def require_no_active_shares(session: AsyncSession, cluster: Cluster) -> None:
    """Raises Conflict when the cluster holds shares of active jobs (naming up to five)."""
    holders = (
        await session.execute(
            select(Job.namespace, Job.name)
            .join(Placement, Placement.job_id == Job.id)
            .join(ClusterShare, ClusterShare.placement_id == Placement.id)
            .where(ClusterShare.cluster_id == cluster.id, Placement.state.in_(HOLDING))
            .limit(5)
        )
    ).all()
    if holders:
        jobs = ", ".join(f"{ns}/{n}" for ns, n in holders)
        raise Conflict(
            f"cluster {cluster.name!r} holds shares of active jobs ({jobs}); cancel them first"
        )


async def _find(session: AsyncSession, name: str) -> Cluster | None:
    return (await session.execute(select(Cluster).where(Cluster.name == name))).scalar_one_or_none()
