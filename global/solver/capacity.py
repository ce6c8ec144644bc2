"""Free capacity of a cluster while decisions are packed into it.

Nodes are summarised per leaf domain as a histogram of free GPUs, so placing pods is
arithmetic on counts, not a walk over 5,000 nodes. Pods go to the nodes with the fewest free
GPUs that still fit them (best fit), units to the smallest domain that holds them, keeping
large domains whole for the jobs that need them. Totals (free GPUs, pod slots per domain) are
kept up to date incrementally, and changes are journaled so a job that does not fit
everywhere is rolled back cheaply.
"""

from __future__ import annotations

import heapq
import weakref
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import zip_longest
from operator import attrgetter, mul

from volcano_global.jobspec.accelerators import is_npu_model
from volcano_global.solver.model import ClusterCapacity, JobRequest, Leaf


@dataclass(slots=True)
class _Leaf:
    name: str
    gpu_model: str
    hist: Sequence[int]  # never changed in place: replaced (the input's tuple until then)
    path: tuple[str, ...]
    memo: dict[int, int] = field(default_factory=dict)
    node_gpus: int = 0

    def slots(self, gpus_per_pod: int) -> int:
        """Pods of `gpus_per_pod` GPUs that fit on the leaf's nodes (memoised until it changes)."""
        found = self.memo.get(gpus_per_pod)
        if found is None:
            found = _slots(self.hist, gpus_per_pod)
            self.memo[gpus_per_pod] = found
        return found


def _slots(hist: Sequence[int], gpus_per_pod: int) -> int:
    """Pods of `gpus_per_pod` GPUs the nodes fit: nodes x pods per node (a node with v free
    GPUs holds v // gpus_per_pod), summed in C; called for every leaf a round looks at."""
    return sum(map(mul, hist[gpus_per_pod:], _pods_per_node(len(hist), gpus_per_pod)))


@cache
def _pods_per_node(length: int, gpus_per_pod: int) -> tuple[int, ...]:
    return tuple(v // gpus_per_pod for v in range(gpus_per_pod, length))


def _free(hist: Sequence[int]) -> int:
    return sum(map(mul, range(len(hist)), hist))  # free GPUs x nodes with that many


_name_and_model = attrgetter("name", "gpu_model")
# Solver inputs seen with no two leaves of one name and model, by id while they live: the
# server keeps a cluster's input across rounds and a round builds several pools from it, and
# the check costs about a fifth of building a pool (3 of 15 ms CPU at 12,500 leaves).
_distinct: weakref.WeakValueDictionary[int, ClusterCapacity] = weakref.WeakValueDictionary()


def _one_per_name(state: ClusterCapacity, leaves: list[_Leaf]) -> list[_Leaf]:
    """The leaves with those of one (name, model) merged into one, where the first was.

    The pool keys its books by leaf name (placements, holds and freed pods name a leaf), so two
    leaves of one name and model would break them. The server can send that pair: a cluster's
    nodes outside any HyperNode form a leaf named after the cluster, and a HyperNode may have
    the cluster's name. Everything downstream already reads such a name as the union of both
    (a placement's pods in "c1" are bound on either's nodes, `read_histograms` reads both), so
    the pool does too: histograms summed; the path kept only if both share it (a domain can
    vouch for a unit only if all the nodes it may be bound on are inside it); node size kept
    only if both know the same one (`Leaf.node_gpus`: every node's size, 0 for unknown)."""
    if _distinct.get(id(state)) is state:
        return leaves
    if len(set(map(_name_and_model, leaves))) == len(leaves):
        _distinct[id(state)] = state
        return leaves  # the usual case: nothing to merge, nothing copied
    merged: dict[tuple[str, str], _Leaf] = {}
    for leaf in leaves:
        first = merged.get((leaf.name, leaf.gpu_model))
        if first is None:
            merged[(leaf.name, leaf.gpu_model)] = leaf
            continue
        first.hist = tuple(map(sum, zip_longest(first.hist, leaf.hist, fillvalue=0)))
        first.path = first.path if first.path == leaf.path else ()
        first.node_gpus = first.node_gpus if first.node_gpus == leaf.node_gpus else 0
    return list(merged.values())


Scope = tuple[int, str] | None  # (tier, domain name), or the whole cluster
Undone = list[tuple[_Leaf, Sequence[int]]]


class ClusterPool:
    def __init__(self, state: ClusterCapacity) -> None:
        self.name = state.name
        self._given = state
        self.leaves = _one_per_name(
            state,
            [
                _Leaf(
                    name=leaf.path[0] if leaf.path else state.name,
                    gpu_model=leaf.gpu_model,
                    hist=leaf.free_nodes,  # a pool is built every round: no copy
                    path=leaf.path,
                    node_gpus=leaf.node_gpus,
                )
                for leaf in state.leaves
            ],
        )
        self._models = sorted({x.gpu_model for x in self.leaves})
        self._free_total: dict[str, int] = defaultdict(int)
        for leaf in self.leaves:
            self._free_total[leaf.gpu_model] += _free(leaf.hist)
        # model -> nodes with v free GPUs, summed over its leaves (built when first asked):
        # a cluster's pod slots of any size in O(GPUs per node), not O(leaves)
        self._nodes_by_free: dict[str, list[int]] = {}
        self._domain_slots: dict[tuple[str, int, int], dict[str, int]] = {}
        # (model, pod size) -> slots -> leaves with that many slots: best fit without a scan
        self._buckets: dict[tuple[str, int], dict[int, dict[str, _Leaf]]] = {}
        self._groups: dict[tuple[str, int], dict[str, list[_Leaf]]] = {}
        self._inside: dict[tuple[str, int, str, int], list[str]] = {}
        self._units: dict[tuple[object, ...], int] = {}
        self._journal: list[tuple[_Leaf, Sequence[int]]] = []
        self._named: dict[str, list[_Leaf]] | None = None  # leaf name -> its leaves (by model)

    def state(self) -> ClusterCapacity:
        """The pool's current free capacity as solver input (the one it was built from while
        nothing changed it: most of a large fleet's clusters, most rounds)."""
        if not self._journal:
            return self._given
        return ClusterCapacity(
            self.name,
            tuple(Leaf(x.gpu_model, tuple(x.hist), x.path, x.node_gpus) for x in self.leaves),
        )

    def take_from_leaf(
        self, leaf_name: str, model: str | None, gpus_per_pod: int, pods: int
    ) -> int:
        """Take up to `pods` pods from one named leaf (capacity held by placements whose pods do
        not show in the inventory yet); returns how many fitted."""
        leaves = [x for x in self._leaves_named(leaf_name) if model is None or x.gpu_model == model]
        taken = 0
        for leaf in leaves:
            hist = list(leaf.hist)
            got = _take_from(hist, gpus_per_pod, pods - taken)
            if got:
                self._journal.append((leaf, leaf.hist))
                self._set_hist(leaf, hist)
                taken += got
        return taken

    def give_back(self, pods: Iterable[tuple[str, str, int, int]]) -> None:
        """Free pods (leaf name, model - "" for the leaf's own -, pods, GPUs per pod), in
        order, each in the first leaf of that name and model, on the node that then has the
        most free GPUs: what `planning.freed` does to a cluster's state, as changes that can
        be rolled back (one per leaf however many pods it takes back)."""
        changed: dict[int, tuple[_Leaf, list[int]]] = {}
        for leaf_name, model, count, per_pod in pods:
            leaf = next(
                (x for x in self._leaves_named(leaf_name) if not model or x.gpu_model == model),
                None,
            )
            if leaf is not None:
                if id(leaf) not in changed:
                    changed[id(leaf)] = (leaf, list(leaf.hist))
                give_to(changed[id(leaf)][1], per_pod, count)
        for leaf, hist in changed.values():
            self._journal.append((leaf, leaf.hist))
            self._set_hist(leaf, hist)

    def _leaves_named(self, leaf_name: str) -> list[_Leaf]:
        if self._named is None:
            self._named = defaultdict(list)
            for x in self.leaves:
                self._named[x.name].append(x)
        return self._named.get(leaf_name, [])

    def only_leaf_named(self, leaf_name: str) -> bool:
        """Whether exactly one leaf of the cluster has this name."""
        return len(self._leaves_named(leaf_name)) == 1

    def replays_to(self, leaf_name: str, takes: Iterable[tuple[int, int]]) -> bool:
        """Whether taking these (GPUs per pod, pods), in this order, from the only leaf of
        this name as the pool was given it leaves what the leaf holds now."""
        (leaf,) = self._leaves_named(leaf_name)
        if len(self._given.leaves) != len(self.leaves):
            return False  # leaves of one name were merged: no given histogram to replay from
        given = next(x for x, y in zip(self._given.leaves, self.leaves, strict=True) if y is leaf)
        hist = list(given.free_nodes)
        for gpus_per_pod, pods in takes:
            _take_from(hist, gpus_per_pod, pods)
        return tuple(hist) == tuple(leaf.hist)

    # -- queries ------------------------------------------------------------------------
    def models(self) -> list[str]:
        return self._models

    def free_gpus(self, model: str) -> int:
        return self._free_total.get(model, 0)

    def slots(self, model: str, gpus_per_pod: int) -> int:
        nodes = self._nodes_by_free.get(model)
        if nodes is None:
            nodes = self._nodes_by_free[model] = [0] * 9
            for leaf in self.leaves:
                if leaf.gpu_model == model:
                    _add(nodes, leaf.hist, 1)
        return _slots(nodes, gpus_per_pod)

    def domains(self, model: str, tier: int) -> dict[str, list[_Leaf]]:
        """Leaves grouped by their domain of `tier` (leaves under no such domain left out).
        The tree never changes, so the grouping is computed once."""
        key = (model, tier)
        if key not in self._groups:
            groups: dict[str, list[_Leaf]] = defaultdict(list)
            for leaf in self.leaves:
                if leaf.gpu_model == model and len(leaf.path) >= tier:
                    groups[leaf.path[tier - 1]].append(leaf)
            self._groups[key] = dict(groups)
        return self._groups[key]

    def domain_slots(self, model: str, tier: int, gpus_per_pod: int) -> dict[str, int]:
        key = (model, tier, gpus_per_pod)
        if key not in self._domain_slots:
            self._domain_slots[key] = {
                name: sum(x.slots(gpus_per_pod) for x in leaves)
                for name, leaves in self.domains(model, tier).items()
            }
        return self._domain_slots[key]

    def _domains_inside(self, model: str, scope: Scope, tier: int) -> list[str]:
        """Names of the tier-`tier` domains inside `scope` (static)."""
        if scope is None:
            return list(self.domains(model, tier))
        key = (model, scope[0], scope[1], tier)
        if key not in self._inside:
            outer_tier, outer = scope
            self._inside[key] = sorted(
                {
                    leaf.path[tier - 1]
                    for leaf in self.domains(model, outer_tier).get(outer, [])
                    if len(leaf.path) >= tier
                }
            )
        return self._inside[key]

    def _scope_slots(self, model: str, scope: Scope, gpus_per_pod: int) -> int:
        if scope is None:
            return self.slots(model, gpus_per_pod)
        return self.domain_slots(model, scope[0], gpus_per_pod).get(scope[1], 0)

    def _units_in(self, job: JobRequest, model: str, scope: Scope) -> int:
        g = job.gpus_per_pod
        if job.unit_tier is None:
            return self._scope_slots(model, scope, g) // job.unit
        slots = self.domain_slots(model, job.unit_tier, g)
        unit = job.unit
        return sum(slots[d] // unit for d in self._domains_inside(model, scope, job.unit_tier))

    def max_units(self, job: JobRequest, model: str) -> int:
        """Units of the job this cluster could take if the job were alone in it."""
        key = (model, job.gpus_per_pod, job.unit, job.unit_tier, job.share_tier)
        if key not in self._units:
            if job.gpus_per_pod == 0:
                found = job.units
            elif job.share_tier is not None:
                found = max(
                    (
                        self._units_in(job, model, (job.share_tier, d))
                        for d in self.domains(model, job.share_tier)
                    ),
                    default=0,
                )
            else:
                found = self._units_in(job, model, None)
            self._units[key] = found
        return self._units[key]

    # -- changes ------------------------------------------------------------------------
    def mark(self) -> int:
        return len(self._journal)

    def rollback(self, mark: int) -> Undone:
        """Undo every change made since `mark`; what is returned can `redo` them."""
        undone: Undone = []
        while len(self._journal) > mark:
            leaf, hist = self._journal.pop()
            undone.append((leaf, leaf.hist))
            self._set_hist(leaf, hist)
        return undone

    def redo(self, undone: Undone) -> None:
        """Make again the changes a `rollback` undid (on the state it left)."""
        for leaf, hist in reversed(undone):
            self._journal.append((leaf, leaf.hist))
            self._set_hist(leaf, hist)

    def _set_hist(self, leaf: _Leaf, hist: Sequence[int]) -> None:
        old = leaf.hist
        model = leaf.gpu_model
        self._free_total[model] += _free(hist) - _free(old)
        nodes = self._nodes_by_free.get(model)
        if nodes is not None:
            _add(nodes, old, -1)
            _add(nodes, hist, 1)
        for (m, g), buckets in self._buckets.items():
            if m == model:
                before, after = _slots(old, g), _slots(hist, g)
                if before != after:
                    del buckets[before][leaf.name]
                    buckets.setdefault(after, {})[leaf.name] = leaf
        for (m, tier, g), per_domain in self._domain_slots.items():
            if m == model and len(leaf.path) >= tier:
                per_domain[leaf.path[tier - 1]] += _slots(hist, g) - _slots(old, g)
        leaf.hist = hist
        leaf.memo.clear()
        self._units.clear()

    def place(self, job: JobRequest, units: int, model: str) -> list[tuple[str, int]] | None:
        """Take `units` units of the job; return (domain, pods) placements, or None and leave
        the pool unchanged when they do not fit."""
        if units <= 0:
            return []
        if job.gpus_per_pod == 0:
            return [(self.name, units * job.unit)]
        mark = self.mark()
        placed = self._place(job, units, model)
        if placed is None:
            self.rollback(mark)
        return placed

    def _place(self, job: JobRequest, units: int, model: str) -> list[tuple[str, int]] | None:
        if job.share_tier is None:
            return self._place_units(job, units, model, None)
        slots = self.domain_slots(model, job.share_tier, job.gpus_per_pod)
        fitting = sorted(
            (slots[d], d)
            for d in self.domains(model, job.share_tier)
            if self._units_in(job, model, (job.share_tier, d)) >= units
        )
        for _, name in fitting:
            mark = self.mark()
            placed = self._place_units(job, units, model, (job.share_tier, name))
            if placed is not None:
                return placed
            self.rollback(mark)
        return None

    def _place_units(
        self, job: JobRequest, units: int, model: str, scope: Scope
    ) -> list[tuple[str, int]] | None:
        g = job.gpus_per_pod
        if job.unit_tier is None:
            pods = units * job.unit
            if scope is None:
                tightest = self._tightest(model, g, pods)
                if tightest is not None:  # what the scan below would pick, found without it
                    return self._take_pods([tightest], g, pods)
                leaves = [x for x in self.leaves if x.gpu_model == model]
            else:
                leaves = self.domains(model, scope[0]).get(scope[1], [])
            return self._take_pods(leaves, g, pods)
        # Each unit goes to the domain with the fewest slots that holds one (then by name).
        # Taking a unit changes that domain's slots alone: a heap keeps the order without a
        # scan of every domain per unit (a gang of 64 units over 625 leaves scanned 40,000).
        unit = job.unit
        slots = self.domain_slots(model, job.unit_tier, g)
        fitting = [
            (slots[d], d)
            for d in self._domains_inside(model, scope, job.unit_tier)
            if slots[d] >= unit
        ]
        heapq.heapify(fitting)
        domains = self.domains(model, job.unit_tier)
        placed: list[tuple[str, int]] = []
        for _ in range(units):
            if not fitting:
                return None
            _, name = heapq.heappop(fitting)
            taken = self._take_pods(domains[name], g, unit)
            if taken is None:
                return None
            placed.extend(taken)
            if slots[name] >= unit:
                heapq.heappush(fitting, (slots[name], name))
        return _merge(placed)

    def _tightest(self, model: str, gpus_per_pod: int, pods: int) -> _Leaf | None:
        """The leaf of `model` with the fewest pod slots that still holds all `pods` (the first
        by name among those), as `_take_pods` picks it, without a scan: the model's leaves are
        kept bucketed by their slots (`_set_hist` moves a leaf between buckets)."""
        if pods <= 0:
            return None
        key = (model, gpus_per_pod)
        buckets = self._buckets.get(key)
        if buckets is None:
            buckets = self._buckets[key] = {}
            for leaf in self.leaves:
                if leaf.gpu_model == model:
                    buckets.setdefault(leaf.slots(gpus_per_pod), {})[leaf.name] = leaf
        fitting = [slots for slots, leaves in buckets.items() if slots >= pods and leaves]
        if not fitting:
            return None
        leaves = buckets[min(fitting)]
        return leaves[min(leaves)]

    def _take_pods(
        self, leaves: list[_Leaf], gpus_per_pod: int, pods: int
    ) -> list[tuple[str, int]] | None:
        room = [(x.slots(gpus_per_pod), x.name, x) for x in leaves]
        room = [r for r in room if r[0]]
        if sum(r[0] for r in room) < pods:
            return None
        # Best fit: the tightest leaf that holds them all, else leaves with the least room first.
        whole = [r for r in room if r[0] >= pods]
        order = [min(whole)] if whole else sorted(room)
        placed: list[tuple[str, int]] = []
        for _, _, leaf in order:
            if pods == 0:
                break
            hist = list(leaf.hist)
            taken = _take_from(hist, gpus_per_pod, pods)
            self._journal.append((leaf, leaf.hist))
            self._set_hist(leaf, hist)
            pods -= taken
            placed.append((leaf.name, taken))
        return placed if pods == 0 else None


def _add(total: list[int], hist: Sequence[int], sign: int) -> None:
    """Add (sign 1) or take away (-1) a leaf's histogram from a cluster's node counts."""
    if len(hist) > len(total):
        total.extend([0] * (len(hist) - len(total)))
    for free, nodes in enumerate(hist):
        if nodes:
            total[free] += sign * nodes


def _take_from(hist: list[int], gpus_per_pod: int, pods: int) -> int:
    """Best fit inside one leaf: nodes with the fewest free GPUs that hold a pod go first."""
    taken = 0
    for v in range(gpus_per_pod, len(hist)):
        per_node = v // gpus_per_pod
        while hist[v] and pods:
            if pods >= per_node:
                nodes = min(hist[v], pods // per_node)
                hist[v] -= nodes
                hist[v - per_node * gpus_per_pod] += nodes
                pods -= nodes * per_node
                taken += nodes * per_node
            else:
                hist[v] -= 1
                hist[v - pods * gpus_per_pod] += 1
                taken += pods
                pods = 0
    return taken


def give_to(hist: list[int], gpus_per_pod: int, pods: int) -> int:
    """Each pod freed on the node with the most free GPUs that can take it back; returns how
    many were. Nodes of one count are freed together while the freed ones cannot take a pod
    more (the answer of freeing one pod at a time, at a round's thousands of pods)."""
    top = len(hist) - 1 - gpus_per_pod
    given = 0
    while given < pods:
        source = next((v for v in range(top, -1, -1) if hist[v] > 0), None)
        if source is None:
            break
        nodes = min(hist[source], pods - given) if source + gpus_per_pod > top else 1
        hist[source] -= nodes
        hist[source + gpus_per_pod] += nodes
        given += nodes
    return given


def _merge(placed: list[tuple[str, int]]) -> list[tuple[str, int]]:
    merged: dict[str, int] = defaultdict(int)
    for name, pods in placed:
        merged[name] += pods
    return sorted(merged.items())


def job_models(job: JobRequest, pool: ClusterPool) -> list[str]:
    """GPU models the job may use in this cluster (one model per share)."""
    if job.gpu_model is not None:
        return [job.gpu_model] if job.gpu_model in pool.models() else []
    models = pool.models()
    if job.gpus_per_pod:
        # A job that pins no model asks for GPUs: an Ascend job always names its chip (the
        # resource does), so NPUs are never "any model" (nor were they before NPU nodes counted).
        models = [m for m in models if not is_npu_model(m)]
    return sorted(models, key=lambda m: -pool.free_gpus(m))
