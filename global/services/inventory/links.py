"""Links between member clusters and the bandwidth active placements reserve on them."""

from __future__ import annotations

import uuid

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster, Link, LinkReservation, Placement
from volcano_global.db.models.placements import HOLDING
from volcano_global.errors import Conflict, Invalid, NotFound


async def create_link(
    session: AsyncSession,
    *,
    cluster_a: str,
    cluster_b: str,
    capacity_gbps: float,
    latency_ms: float,
) -> Link:
    if cluster_a == cluster_b:
        raise Invalid.one("clusterB", "must differ from clusterA (a link joins two clusters)")
    found = {
        c.name: c
        for c in (
            await session.execute(select(Cluster).where(Cluster.name.in_([cluster_a, cluster_b])))
        ).scalars()
    }
    for field, name in (("clusterA", cluster_a), ("clusterB", cluster_b)):
        if name not in found:
            raise Invalid.one(field, f"cluster {name!r} is not registered")
    first, second = sorted((cluster_a, cluster_b))
    if await _find(session, first, second) is not None:
        raise Conflict(f"a link between {first} and {second} already exists")
    link = Link(
        cluster_a_id=found[first].id,
        cluster_b_id=found[second].id,
        capacity_gbps=capacity_gbps,
        latency_ms=latency_ms,
    )
    session.add(link)
    await session.flush()
    await session.refresh(link, ["cluster_a", "cluster_b"])
    return link


async def list_links(session: AsyncSession) -> list[Link]:
    links = (await session.execute(select(Link))).unique().scalars()
    return sorted(links, key=lambda link: (link.cluster_a.name, link.cluster_b.name))


async def reserved_gbps(
    session: AsyncSession, *, link_ids: list[uuid.UUID]
) -> dict[uuid.UUID, float]:
    """Bandwidth held on each link by active (and preemptors' nominated) placements, and by
    the copies that belong to no share while they run (their rows go when they end)."""
    rows = await session.execute(
        select(LinkReservation.link_id, func.sum(LinkReservation.gbps))
        .outerjoin(Placement, Placement.id == LinkReservation.placement_id)
        .where(
            LinkReservation.link_id.in_(link_ids),
            or_(Placement.state.in_(HOLDING), LinkReservation.copy_id.is_not(None)),
        )
        .group_by(LinkReservation.link_id)
    )
    return {link_id: float(total or 0.0) for link_id, total in rows}


async def delete_link(session: AsyncSession, *, cluster_a: str, cluster_b: str) -> None:
    first, second = sorted((cluster_a, cluster_b))
    link = await _find(session, first, second)
    if link is None:
        raise NotFound(f"no link between {first} and {second}")
    held = (await reserved_gbps(session, link_ids=[link.id])).get(link.id, 0.0)
    if held > 0:
        raise Conflict(
            f"link {first}<->{second} carries {held:g} Gbps reserved by active jobs or copies "
            "in progress; cancel the jobs (their copies stop), or wait for the copies to end"
        )
    await session.delete(link)
    await session.flush()


async def _find(session: AsyncSession, first: str, second: str) -> Link | None:
    a = select(Cluster.id).where(Cluster.name == first).scalar_subquery()
    b = select(Cluster.id).where(Cluster.name == second).scalar_subquery()
    query = select(Link).where(
        or_(
            (Link.cluster_a_id == a) & (Link.cluster_b_id == b),
            (Link.cluster_a_id == b) & (Link.cluster_b_id == a),
        )
    )
    return (await session.execute(query)).unique().scalar_one_or_none()
