"""Free-GPU histograms per (leaf domain, GPU model) of each cluster, kept in memory between
scheduling rounds and brought up to date from the nodes written since the previous round: with
100,000 nodes changing all the time, re-reading every node each round cost a round more CPU
than solving it.

Exact because every delta that upserts nodes logs them as it writes them (name, domain and the
columns counted here) at the cluster's inventory sequence it stores, in its own transaction,
under the cluster's row lock (`services/inventory/node_changes.py`): the log's rows above the
sequence the view has seen, applied in order, are every node written since, at its last
values; the view reads no node for them. The log is pruned behind a window of sequences; a
view whose sequence the log no longer reaches back to (checked after reading the log, against
the bounds the cluster's row keeps in the transactions that move them) reads that cluster
whole, as does a new inventory generation (a full replacement) or a delta that removed nodes (a
removed row leaves nothing to read). Reading a change twice is harmless (each node's state
replaces the previous one). Nodes are known by name, unique in a cluster.

A cluster's solver input (its leaves, sorted, with their topology paths) is kept too and rebuilt
only when one of its histograms moved: a round over 20 clusters of 12,500 leaves mostly finds
nothing changed in most of them."""

from __future__ import annotations

import asyncio
import itertools
import uuid
import weakref
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import NODE_USE, Cluster, Node, NodeUse
from volcano_global.loop_turns import Turns
from volcano_global.services.inventory.domain_trees import DomainTree
from volcano_global.services.inventory.node_changes import LoggedNode, covered, logged_since
from volcano_global.services.inventory.snapshots import NODE_CAPACITY_COLUMNS, UNKNOWN_GPU_MODEL
from volcano_global.solver import ClusterCapacity, Leaf

Bucket = tuple[uuid.UUID | None, str, int, int]  # (leaf domain, model, free GPUs, its GPUs)
LeafKey = tuple[uuid.UUID | None, str]  # (leaf domain, model)
_versions = itertools.count(1)  # unique across views: a replaced view never reuses a version


@dataclass
class _ClusterView:
    generation: int
    removed_seq: int
    seq: int  # every node written at or below this sequence is reflected
    # Counted nodes by name: (index in `keys`, free GPUs, its GPUs). Ints only, so the garbage
    # collector stops tracking them: 100,000 nodes kept as (domain id, ...) tuples were half the
    # objects every full collection of the scheduling replica walked (docs/benchmarks.md).
    nodes: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    keys: list[LeafKey] = field(default_factory=list)  # each leaf key once, ids shared
    key_index: dict[LeafKey, int] = field(default_factory=dict)
    domains: dict[str, uuid.UUID] = field(default_factory=dict)  # the log's ids, parsed once
    hists: dict[LeafKey, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0] * 9))
    sizes: dict[LeafKey, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    version: int = field(default_factory=lambda: next(_versions))  # moves with any histogram
    state: tuple[int, ClusterCapacity] | None = None  # (the version it was built at, solver input)

    def domain_id(self, logged: str | None) -> uuid.UUID | None:
        if logged is None:
            return None
        found = self.domains.get(logged)
        if found is None:
            found = self.domains[logged] = uuid.UUID(logged)
        return found

    def put(self, name: str, bucket: Bucket | None) -> None:
        counted = None if bucket is None else (self._key(bucket[:2]), bucket[2], bucket[3])
        old = self.nodes.pop(name, None)
        if old != counted:
            self.version = next(_versions)
        if old is not None:
            key = self.keys[old[0]]
            self.hists[key][old[1]] -= 1
            self.sizes[key][old[2]] -= 1
        if counted is not None:
            self.nodes[name] = counted
            key = self.keys[counted[0]]
            _count(self.hists[key], counted[1], 1)
            self.sizes[key][counted[2]] += 1

    def _key(self, key: LeafKey) -> int:
        index = self.key_index.get(key)
        if index is None:
            index = self.key_index[key] = len(self.keys)
            self.keys.append(key)
        return index


def node_size(sizes: Counter[int]) -> int:
    """GPUs of each node of a leaf when they all have the same (0: mixed or none), which lets
    reservations know a leaf's shape (`Leaf.node_gpus`)."""
    present = [gpus for gpus, nodes in sizes.items() if nodes > 0]
    return present[0] if len(present) == 1 else 0


def _count(hist: list[int], free: int, nodes: int) -> None:
    """`nodes` more nodes with `free` free GPUs (the histogram grows as needed)."""
    if free >= len(hist):
        hist.extend([0] * (free + 1 - len(hist)))
    hist[free] += nodes


_views: dict[uuid.UUID, _ClusterView] = {}

_COLUMNS = (Node.name, Node.cluster_id, *NODE_CAPACITY_COLUMNS)
# The GPUs a node's pods use, found by key for each node a query reads: the few nodes of the
# leaves a round's starts use, where a join could be planned as a hash over every usage row.
_USED_BY_PODS = select(NodeUse.gpu_used).where(NODE_USE).correlate(Node).scalar_subquery()


async def free_histograms(
    session: AsyncSession, clusters: list[Cluster]
) -> dict[uuid.UUID, dict[LeafKey, tuple[int, ...]]]:
    """Per cluster: (leaf domain, model) -> `h` where `h[v]` nodes have exactly `v` free GPUs
    (ready, schedulable nodes with GPUs), as of the clusters' rows the caller read."""
    async with _one_at_a_time():
        await _refresh(session, clusters)
        return {
            c.id: {key: tuple(h) for key, h in _views[c.id].hists.items() if any(h)}
            for c in clusters
        }


async def free_states(
    session: AsyncSession, clusters: list[Cluster], trees: dict[uuid.UUID, DomainTree]
) -> dict[uuid.UUID, ClusterCapacity]:
    """Per cluster: its free capacity as solver input (leaves sorted by path and model), as of
    the clusters' rows the caller read; `trees` at the generations of those rows."""
    async with _one_at_a_time():
        await _refresh(session, clusters)
        states = {}
        turns = Turns()
        for c in clusters:
            await turns.take()
            view = _views[c.id]
            if view.state is None or view.state[0] != view.version or view.state[1].name != c.name:
                sizes = {key: node_size(counted) for key, counted in view.sizes.items()}
                view.state = (view.version, solver_state(c.name, view.hists, trees[c.id], sizes))
            states[c.id] = view.state[1]
        return states


def solver_state(
    name: str,
    hists: Mapping[LeafKey, Sequence[int]],
    tree: DomainTree,
    sizes: Mapping[LeafKey, int] | None = None,
) -> ClusterCapacity:
    """A cluster's leaf histograms as solver input: leaves sorted by path and model, each with
    its nodes' size where `sizes` knows it."""
    sizes = sizes or {}
    leaves = [
        Leaf(model, tuple(h), tree.path(domain_id), sizes.get((domain_id, model), 0))
        for (domain_id, model), h in hists.items()
        if any(h)
    ]
    leaves.sort(key=lambda leaf: (leaf.path, leaf.gpu_model))
    return ClusterCapacity(name, tuple(leaves))


async def read_histograms(
    session: AsyncSession,
    clusters: list[Cluster],
    trees: dict[uuid.UUID, DomainTree],
    leaves: set[str],
) -> tuple[dict[uuid.UUID, dict[LeafKey, list[int]]], dict[uuid.UUID, dict[LeafKey, int]]]:
    """Per cluster, the histograms of just these leaves (leaf domain names; a cluster's own
    name for its nodes outside any domain), read afresh from the nodes, not from the view;
    and per cluster the leaves' node sizes (`node_size`)."""
    domain_ids = [t.ids[name] for t in trees.values() for name in leaves if name in t.ids]
    outside = [c.id for c in clusters if c.name in leaves]
    rows = await session.execute(
        select(
            Node.cluster_id,
            Node.domain_id,
            Node.gpu_model,
            (Node.gpu_allocatable - _USED_BY_PODS).label("free"),
            Node.gpu_allocatable,
            func.count(),
        )
        .where(
            Node.cluster_id.in_([c.id for c in clusters]),
            Node.ready.is_(True),
            Node.schedulable.is_(True),
            Node.gpu_allocatable > 0,
            or_(
                Node.domain_id.in_(domain_ids),
                and_(Node.domain_id.is_(None), Node.cluster_id.in_(outside)),
            ),
        )
        .group_by(Node.cluster_id, Node.domain_id, Node.gpu_model, "free", Node.gpu_allocatable)
    )
    hists: dict[uuid.UUID, dict[LeafKey, list[int]]] = defaultdict(
        lambda: defaultdict(lambda: [0] * 9)
    )
    sizes: dict[uuid.UUID, dict[LeafKey, Counter[int]]] = defaultdict(lambda: defaultdict(Counter))
    for cluster_id, domain_id, model, free, allocatable, count in rows:
        key = (domain_id, model or UNKNOWN_GPU_MODEL)
        _count(hists[cluster_id][key], max(free, 0), count)
        sizes[cluster_id][key][allocatable] += count
    return hists, {
        cid: {key: node_size(counted) for key, counted in per.items()} for cid, per in sizes.items()
    }


def _one_at_a_time() -> asyncio.Lock:
    """The views are brought up to date and read by one caller at a time (a round and an API
    preview of the same replica): `_refresh` yields the event loop while it works, and two
    callers would otherwise apply the log's nodes over each other. One lock per event loop
    (tests run many loops in one process). A caller takes it holding its connection already
    (it has read the clusters in its transaction): on SQLite's one connection, a caller that
    waited for the connection while holding the lock would wait on the holder's transaction,
    which waits on the lock."""
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


async def _refresh(session: AsyncSession, clusters: list[Cluster]) -> None:
    """Bring the views of `clusters` up to the rows the caller read: a cluster read whole when
    its view is of another generation, it removed nodes since, or its change log no longer
    reaches back to the view's sequence; otherwise from the nodes its log holds since. A view
    never claims more than it counts: a cluster read whole replaces its view once all its
    nodes are in, and a view's sequence moves once its log's nodes are, so a refresh cancelled
    or failed half-way leaves views behind (caught up by the next), not wrong. The caller
    holds `_one_at_a_time`; between items the event loop gets a turn once 5 ms have passed."""
    whole, since = [], {}
    for c in clusters:
        view = _views.get(c.id)
        if (
            view is None
            or view.generation != c.inventory_generation
            or view.removed_seq != c.nodes_removed_seq
        ):
            whole.append(c)
        elif c.inventory_seq > view.seq:
            since[c.id] = view.seq
    logged: list[tuple[uuid.UUID, list[LoggedNode]]] = []
    kept: set[uuid.UUID] = set()
    if since:
        logged = await logged_since(session, since)
        kept = await covered(session, since, {c.id: c.inventory_generation for c in clusters})
        whole += [c for c in clusters if c.id in since and c.id not in kept]
        logged = [(cluster_id, nodes) for cluster_id, nodes in logged if cluster_id in kept]
    turns = Turns()
    await _read_whole(session, whole, turns)
    for cluster_id, nodes in logged:
        await turns.take()
        view = _views[cluster_id]
        for name, domain, *values in nodes:
            view.put(name, _bucket(view.domain_id(domain), *values))
    for c in clusters:
        if c.id in kept:
            _views[c.id].seq = c.inventory_seq


async def _read_whole(session: AsyncSession, clusters: list[Cluster], turns: Turns) -> None:
    """New views of `clusters` from all their nodes, each in `_views` once filled (the turn
    checked every 500 rows: a row's own work is short next to the check)."""
    if not clusters:
        return
    fresh = {
        c.id: _ClusterView(c.inventory_generation, c.nodes_removed_seq, c.inventory_seq)
        for c in clusters
    }
    rows = await session.execute(
        select(*_COLUMNS)
        .join(NodeUse, NODE_USE)
        .where(Node.cluster_id.in_(list(fresh)), NodeUse.cluster_id.in_(list(fresh)))
    )
    for i, (name, cluster_id, *values) in enumerate(rows):
        if i % 500 == 0:
            await turns.take()
        fresh[cluster_id].put(name, _bucket(*values))
    _views.update(fresh)


def _bucket(
    domain_id: uuid.UUID | None,
    model: str | None,
    allocatable: int,
    used: int,
    ready: bool,
    schedulable: bool,
) -> Bucket | None:
    """A node's place in the histograms (None: it counts nowhere)."""
    if not (ready and schedulable and allocatable > 0):
        return None
    return (domain_id, model or UNKNOWN_GPU_MODEL, max(allocatable - used, 0), allocatable)
