"""What a person reads of a large fleet one piece at a time: the member clusters a page at a
time (by name, searchable), and a cluster's topology one level at a time (the console's
collapsible tree), so a page never holds 100 clusters' rows or 600 ToRs at once."""

from __future__ import annotations

import base64
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import NODE_USE, Cluster, ClusterState, Node, NodeUse, TopologyDomain
from volcano_global.db.parts import parts
from volcano_global.errors import Invalid, NotFound
from volcano_global.jobspec.fields import is_dns_label
from volcano_global.services.inventory.domain_trees import DomainTree, domain_trees
from volcano_global.services.inventory.snapshots import UNKNOWN_GPU_MODEL

IDS_A_STATEMENT = 10_000  # domain ids a read takes (a whole tree may be large)


async def cluster_page(
    session: AsyncSession,
    *,
    text: str | None,
    state: ClusterState | None,
    limit: int | None,
    continue_token: str | None,
) -> tuple[list[Cluster], str | None]:
    """Clusters by name after the token's, whose name holds `text` (any case), in `state`;
    the token of the next page, or None on the last (or with no limit: every cluster)."""
    query = select(Cluster).order_by(Cluster.name)
    if text:
        query = query.where(func.lower(Cluster.name).contains(text.lower(), autoescape=True))
    if state is not None:
        query = query.where(Cluster.state == state)
    if continue_token:
        query = query.where(Cluster.name > _decode(continue_token))
    if limit is None:
        return list((await session.execute(query)).scalars()), None
    rows = list((await session.execute(query.limit(limit + 1))).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (_encode(rows[-1].name) if more else None)


def _encode(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _decode(token: str) -> str:
    """The cluster name the token carries; anything else (a cluster name is a DNS label) is
    refused before it reaches a query."""
    try:
        padded = token + "=" * (-len(token) % 4)
        name = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        name = ""
    if not is_dns_label(name):
        raise Invalid.one("continue (query)", "invalid continue token")
    return name


@dataclass(frozen=True)
class DomainView:
    name: str
    tier: int
    tier_name: str | None
    parent: str | None
    capacity: dict[str, tuple[int, int]]  # model -> (total, free)
    nodes: int
    nodes_not_ready: list[str]


async def topology_level(
    session: AsyncSession, *, cluster: Cluster, parent: str | None, top: bool, max_listed: int = 50
) -> list[tuple[DomainView, int]]:
    """The cluster's domains under `parent` (`top`: those under none), or all of them with
    neither, top tier first; each with its GPUs, its nodes (not ready ones named, up to
    `max_listed`) and how many children it has (what the tree's expander shows). The tree
    comes from the per-generation cache and only the chosen domains' rows are read; the nodes
    are counted by the database per domain, not read one by one (a cluster of 5,000 nodes)."""
    if parent is not None and top:
        raise Invalid.one("top (query)", "give either parent or top, not both")
    tree = (await domain_trees(session, {cluster.id: cluster.inventory_generation})).get(cluster.id)
    if tree is None:  # deleted since the caller read it
        raise NotFound(f"cluster {cluster.name!r} not found")
    if parent is not None and parent not in tree.ids:
        raise Invalid.one("parent (query)", f"no topology domain {parent!r} in this cluster")
    if top:
        chosen = {d for d, p in tree.parents.items() if p not in tree.names}
    elif parent is not None:
        chosen = {d for d, p in tree.parents.items() if p == tree.ids[parent]}
    else:
        chosen = set(tree.names)
    children = Counter(p for p in tree.parents.values() if p in tree.names)
    rows = await _rows(session, list(chosen))
    counts, capacity = await _node_sums(session, cluster, tree, chosen)
    not_ready = await _not_ready(session, cluster, tree, chosen, max_listed)
    return [
        (
            DomainView(
                name=name,
                tier=tier,
                tier_name=tier_name,
                parent=tree.names.get(parent_id) if parent_id is not None else None,
                capacity={m: (t, f) for m, (t, f) in sorted(capacity[domain_id].items())},
                nodes=counts[domain_id],
                nodes_not_ready=not_ready[domain_id],
            ),
            children[domain_id],
        )
        for domain_id, name, tier, tier_name, parent_id in rows
    ]


async def _rows(session: AsyncSession, ids: list[uuid.UUID]) -> list[Any]:
    """The domains' rows (id, name, tier, tier name, parent id), top tier first, by name."""
    found: list[Any] = []
    for part in parts(ids, IDS_A_STATEMENT):
        found += (
            await session.execute(
                select(
                    TopologyDomain.id,
                    TopologyDomain.name,
                    TopologyDomain.tier,
                    TopologyDomain.tier_name,
                    TopologyDomain.parent_id,
                ).where(TopologyDomain.id.in_(part))
            )
        ).all()
    return sorted(found, key=lambda r: (-r.tier, r.name))


# What a node adds to its domains' free GPUs (`snapshots.contribution`): only on a ready,
# schedulable node, never below 0.
_FREE_GPUS = case(
    (
        and_(Node.ready, Node.schedulable, Node.gpu_allocatable > NodeUse.gpu_used),
        Node.gpu_allocatable - NodeUse.gpu_used,
    ),
    else_=0,
)


async def _node_sums(
    session: AsyncSession, cluster: Cluster, tree: DomainTree, chosen: set[uuid.UUID]
) -> tuple[dict[uuid.UUID, int], dict[uuid.UUID, dict[str, list[int]]]]:
    """Nodes under each chosen domain (its whole subtree), and their GPUs by model (total,
    free) as `snapshots.contribution` counts them: one sum per domain the nodes are in (the
    ToRs) and GPU model, added up the tree here. A GPU-less node counts as a node only."""
    counts: dict[uuid.UUID, int] = defaultdict(int)
    capacity: dict[uuid.UUID, dict[str, list[int]]] = defaultdict(lambda: defaultdict(_pair))
    sums = await session.execute(
        select(
            Node.domain_id,
            Node.gpu_model,
            func.count(),
            func.sum(Node.gpu_allocatable),
            func.sum(_FREE_GPUS),
        )
        .join(NodeUse, NODE_USE)
        .where(Node.cluster_id == cluster.id, Node.domain_id.is_not(None))
        .group_by(Node.domain_id, Node.gpu_model)
    )
    for domain_id, model, count, total, free in sums:
        for above in tree.chain(domain_id):
            if above in chosen:
                counts[above] += count
                if total:  # a GPU model's entry only where nodes have GPUs
                    entry = capacity[above][model or UNKNOWN_GPU_MODEL]
                    entry[0] += total
                    entry[1] += free
    return counts, capacity


def _pair() -> list[int]:
    return [0, 0]


async def _not_ready(
    session: AsyncSession,
    cluster: Cluster,
    tree: DomainTree,
    chosen: set[uuid.UUID],
    max_listed: int,
) -> dict[uuid.UUID, list[str]]:
    """The names of the not ready nodes under each chosen domain (few), by name, at most
    `max_listed` a domain."""
    not_ready: dict[uuid.UUID, list[str]] = defaultdict(list)
    names = await session.execute(
        select(Node.name, Node.domain_id)
        .where(Node.cluster_id == cluster.id, Node.ready.is_(False), Node.domain_id.is_not(None))
        .order_by(Node.name)
    )
    for name, domain_id in names:
        for above in tree.chain(domain_id):
            if above in chosen and len(not_ready[above]) < max_listed:
                not_ready[above].append(name)
    return not_ready
