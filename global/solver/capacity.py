"""Free capacity of a cluster while decisions are packed into it.

Nodes are summarised per leaf domain as a histogram of free GPUs, so placing pods is
arithmetic on counts, not a walk over 5,000 nodes. Pods go to the nodes with the fewest free
GPUs that still fit them (best fit), units to the smallest domain that holds them, keeping
large domains whole for the jobs that need them. Changes are journaled so that a job that
does not fit everywhere can be rolled back cheaply.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from volcano_global.solver.model import ClusterState, JobRequest


@dataclass
class _Leaf:
    name: str
    gpu_model: str
    hist: list[int]
    path: tuple[str, ...]
    memo: dict[int, int] = field(default_factory=dict)

    def slots(self, gpus_per_pod: int) -> int:
        """Pods of `gpus_per_pod` GPUs that fit on the leaf's nodes (memoised until it changes)."""
        found = self.memo.get(gpus_per_pod)
        if found is None:
            found = sum(
                n * (v // gpus_per_pod) for v, n in enumerate(self.hist) if v >= gpus_per_pod
            )
            self.memo[gpus_per_pod] = found
        return found


class ClusterPool:
    def __init__(self, state: ClusterState) -> None:
        self.name = state.name
        self.leaves = [
            _Leaf(
                name=leaf.path[0] if leaf.path else state.name,
                gpu_model=leaf.gpu_model,
                hist=list(leaf.free_nodes),
                path=leaf.path,
            )
            for leaf in state.leaves
        ]
        self._models = sorted({x.gpu_model for x in self.leaves})
        self._cache: dict[tuple[object, ...], int] = {}
        self._groups: dict[tuple[str, int], dict[str, list[_Leaf]]] = {}
        self._journal: list[tuple[_Leaf, list[int]]] = []

    # -- queries (cached until the pool changes) ---------------------------------------
    def models(self) -> list[str]:
        return self._models

    def free_gpus(self, model: str) -> int:
        key = ("free", model)
        if key not in self._cache:
            self._cache[key] = sum(
                v * n for x in self.leaves if x.gpu_model == model for v, n in enumerate(x.hist)
            )
        return self._cache[key]

    def slots(self, model: str, gpus_per_pod: int) -> int:
        key = ("slots", model, gpus_per_pod)
        if key not in self._cache:
            self._cache[key] = sum(
                x.slots(gpus_per_pod) for x in self.leaves if x.gpu_model == model
            )
        return self._cache[key]

    def domains(self, model: str, tier: int) -> dict[str, list[_Leaf]]:
        """Leaves grouped by their domain of `tier` (leaves not under such a domain left out).
        The tree never changes, so the grouping is computed once."""
        key = (model, tier)
        if key not in self._groups:
            groups: dict[str, list[_Leaf]] = defaultdict(list)
            for leaf in self.leaves:
                if leaf.gpu_model == model and len(leaf.path) >= tier:
                    groups[leaf.path[tier - 1]].append(leaf)
            self._groups[key] = dict(groups)
        return self._groups[key]

    def max_units(self, job: JobRequest, model: str) -> int:
        """Units of the job this cluster could take if the job were alone in it."""
        key = (model, job.gpus_per_pod, job.unit, job.unit_tier, job.share_tier)
        if key not in self._cache:
            self._cache[key] = self._max_units(job, model)
        return self._cache[key]

    def _max_units(self, job: JobRequest, model: str) -> int:
        if job.gpus_per_pod == 0:
            return job.units
        if job.share_tier is not None:
            return max(
                (
                    self._units_in(leaves, job)
                    for leaves in self.domains(model, job.share_tier).values()
                ),
                default=0,
            )
        return self._units_in([x for x in self.leaves if x.gpu_model == model], job)

    def _units_in(self, leaves: list[_Leaf], job: JobRequest) -> int:
        g = job.gpus_per_pod
        if job.unit_tier is None:
            return sum(x.slots(g) for x in leaves) // job.unit
        groups: dict[str, int] = defaultdict(int)
        for leaf in leaves:
            if len(leaf.path) >= job.unit_tier:
                groups[leaf.path[job.unit_tier - 1]] += leaf.slots(g)
        return sum(s // job.unit for s in groups.values())

    # -- changes ------------------------------------------------------------------------
    def mark(self) -> int:
        return len(self._journal)

    def rollback(self, mark: int) -> None:
        """Undo every change made since `mark`."""
        while len(self._journal) > mark:
            leaf, hist = self._journal.pop()
            leaf.hist = hist
            leaf.memo.clear()
        self._cache.clear()

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
        else:
            self._cache.clear()
        return placed

    def _place(self, job: JobRequest, units: int, model: str) -> list[tuple[str, int]] | None:
        if job.share_tier is None:
            return self._place_units([x for x in self.leaves if x.gpu_model == model], job, units)
        g = job.gpus_per_pod
        fitting = sorted(
            (sum(x.slots(g) for x in leaves), name)
            for name, leaves in self.domains(model, job.share_tier).items()
            if self._units_in(leaves, job) >= units
        )
        for _, name in fitting:
            mark = self.mark()
            placed = self._place_units(self.domains(model, job.share_tier)[name], job, units)
            if placed is not None:
                return placed
            self.rollback(mark)
        return None

    def _place_units(
        self, leaves: list[_Leaf], job: JobRequest, units: int
    ) -> list[tuple[str, int]] | None:
        g = job.gpus_per_pod
        if job.unit_tier is None:
            return self._take_pods(leaves, g, units * job.unit)
        groups: dict[str, list[_Leaf]] = defaultdict(list)
        for leaf in leaves:
            if len(leaf.path) >= job.unit_tier:
                groups[leaf.path[job.unit_tier - 1]].append(leaf)
        placed: list[tuple[str, int]] = []
        for _ in range(units):
            fitting = [
                (room, name)
                for name, group in groups.items()
                if (room := sum(x.slots(g) for x in group)) >= job.unit
            ]
            if not fitting:
                return None
            taken = self._take_pods(groups[min(fitting)[1]], g, job.unit)
            if taken is None:
                return None
            placed.extend(taken)
        return _merge(placed)

    def _take_pods(
        self, leaves: list[_Leaf], gpus_per_pod: int, pods: int
    ) -> list[tuple[str, int]] | None:
        if sum(x.slots(gpus_per_pod) for x in leaves) < pods:
            return None
        placed: list[tuple[str, int]] = []
        for leaf in sorted(leaves, key=lambda x: (x.slots(gpus_per_pod), x.name)):
            if pods == 0:
                break
            if leaf.slots(gpus_per_pod) == 0:
                continue
            self._journal.append((leaf, list(leaf.hist)))
            taken = _take_from_leaf(leaf, gpus_per_pod, pods)
            pods -= taken
            placed.append((leaf.name, taken))
        return placed


def _take_from_leaf(leaf: _Leaf, gpus_per_pod: int, pods: int) -> int:
    """Best fit inside one leaf: nodes with the fewest free GPUs that hold a pod go first."""
    taken = 0
    for v in range(gpus_per_pod, len(leaf.hist)):
        per_node = v // gpus_per_pod
        while leaf.hist[v] and pods:
            if pods >= per_node:
                nodes = min(leaf.hist[v], pods // per_node)
                leaf.hist[v] -= nodes
                leaf.hist[v - per_node * gpus_per_pod] += nodes
                pods -= nodes * per_node
                taken += nodes * per_node
            else:
                leaf.hist[v] -= 1
                leaf.hist[v - pods * gpus_per_pod] += 1
                taken += pods
                pods = 0
    leaf.memo.clear()
    return taken


def _merge(placed: list[tuple[str, int]]) -> list[tuple[str, int]]:
    merged: dict[str, int] = defaultdict(int)
    for name, pods in placed:
        merged[name] += pods
    return sorted(merged.items())


def job_models(job: JobRequest, pool: ClusterPool) -> list[str]:
    """GPU models the job may use in this cluster (one model per share)."""
    if job.gpu_model is not None:
        return [job.gpu_model] if job.gpu_model in pool.models() else []
    return sorted(pool.models(), key=lambda m: -pool.free_gpus(m))
