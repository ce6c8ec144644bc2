"""Each cluster's topology tree (domain names, ids, parents), read once per inventory
generation and kept in memory: inventory deltas and scheduling rounds need it many times a
second, and it only changes with a full inventory replacement, which bumps the generation.

A tree is read in one statement together with the generation it belongs to, so a cached tree is
always a committed state; a session that has replaced a cluster's inventory itself (not yet
committed) neither reads nor fills the cache for that cluster."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster, TopologyDomain

_REPLACED = "inventory_replaced"  # session.info key: ids of clusters replaced in this session


@dataclass
class DomainTree:
    ids: dict[str, uuid.UUID] = field(default_factory=dict)  # name -> id
    names: dict[uuid.UUID, str] = field(default_factory=dict)  # id -> name
    parents: dict[uuid.UUID, uuid.UUID | None] = field(default_factory=dict)
    _paths: dict[uuid.UUID, tuple[str, ...]] = field(default_factory=dict)
    _chains: dict[uuid.UUID | None, tuple[uuid.UUID, ...]] = field(default_factory=dict)

    def share_ids(self) -> None:
        """Each parent held as the id object its own row gave: a tree is kept for as long as
        its generation lasts, and every object it holds is one more for each full collection
        of the garbage collector to walk."""
        own = {domain_id: domain_id for domain_id in self.names}
        self.parents = {d: None if p is None else own.get(p, p) for d, p in self.parents.items()}

    def chain(self, domain_id: uuid.UUID | None) -> tuple[uuid.UUID, ...]:
        """The domain and its ancestors, lowest first (none for a domain not in the tree);
        kept per domain (a delta asks for it twice per node)."""
        chain = self._chains.get(domain_id)
        if chain is None:
            walk, at = [], domain_id
            while at is not None and at in self.names:
                walk.append(at)
                at = self.parents.get(at)
            chain = self._chains[domain_id] = tuple(walk)
        return chain

    def path(self, domain_id: uuid.UUID | None) -> tuple[str, ...]:
        """Names of the domain and its ancestors, lowest first; () for no domain."""
        if domain_id is None:
            return ()
        path = self._paths.get(domain_id)
        if path is None:
            path = self._paths[domain_id] = tuple(self.names[d] for d in self.chain(domain_id))
        return path


_cache: dict[uuid.UUID, tuple[int, DomainTree]] = {}  # cluster id -> (generation, tree)


def mark_replaced(session: AsyncSession, cluster_id: uuid.UUID) -> None:
    """This session has replaced the cluster's inventory (uncommitted): keep it off the cache."""
    session.info.setdefault(_REPLACED, set()).add(cluster_id)


async def domain_trees(
    session: AsyncSession, generations: dict[uuid.UUID, int]
) -> dict[uuid.UUID, DomainTree]:
    """The tree of each cluster, given the generation the caller read it at."""
    own = session.info.get(_REPLACED, set())
    trees: dict[uuid.UUID, DomainTree] = {}
    missing = []
    for cluster_id, generation in generations.items():
        cached = _cache.get(cluster_id)
        if cached is not None and cached[0] == generation and cluster_id not in own:
            trees[cluster_id] = cached[1]
        else:
            missing.append(cluster_id)
    if missing:
        read = await _read(session, missing)
        for cluster_id, (generation, tree) in read.items():
            if cluster_id not in own:
                _cache[cluster_id] = (generation, tree)
            trees[cluster_id] = tree
    return trees


async def _read(
    session: AsyncSession, cluster_ids: list[uuid.UUID]
) -> dict[uuid.UUID, tuple[int, DomainTree]]:
    rows = await session.execute(
        select(
            Cluster.id,
            Cluster.inventory_generation,
            TopologyDomain.id,
            TopologyDomain.name,
            TopologyDomain.parent_id,
        )
        .outerjoin(TopologyDomain, TopologyDomain.cluster_id == Cluster.id)
        .where(Cluster.id.in_(cluster_ids))
    )
    read: dict[uuid.UUID, tuple[int, DomainTree]] = {}
    for cluster_id, generation, domain_id, name, parent_id in rows:
        tree = read.setdefault(cluster_id, (generation, DomainTree()))[1]
        if domain_id is not None:
            tree.ids[name] = domain_id
            tree.names[domain_id] = name
            tree.parents[domain_id] = parent_id
    for _, tree in read.values():
        tree.share_ids()
    return read
