"""Free capacity of a cluster while decisions are packed into it.

Nodes are summarised per leaf domain as a histogram of free GPUs, so placing pods is
arithmetic on counts, not a walk over 5,000 nodes. Pods go to the nodes with the fewest free
GPUs that still fit them (best fit), units to the smallest domain that holds them, keeping
large domains whole for the jobs that need them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from volcano_global.solver.model import ClusterState, JobRequest


@dataclass
class _Leaf:
    name: str
    gpu_model: str
    hist: list[int]
    path: tuple[str, ...]

    def slots(self, gpus_per_pod: int) -> int:
        return sum(n * (v // gpus_per_pod) for v, n in enumerate(self.hist) if v >= gpus_per_pod)


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

    def copy(self) -> ClusterPool:
        clone = object.__new__(ClusterPool)
        clone.name = self.name
        clone.leaves = [_Leaf(x.name, x.gpu_model, list(x.hist), x.path) for x in self.leaves]
        return clone

    def models(self) -> list[str]:
        return sorted({x.gpu_model for x in self.leaves})

    def free_gpus(self, model: str) -> int:
        return sum(v * n for x in self.leaves if x.gpu_model == model for v, n in enumerate(x.hist))

    def slots(self, model: str, gpus_per_pod: int) -> int:
        return sum(x.slots(gpus_per_pod) for x in self.leaves if x.gpu_model == model)

    def domains(self, model: str, tier: int) -> dict[str, list[_Leaf]]:
        """Leaves grouped by their domain of `tier` (leaves not under such a domain left out)."""
        groups: dict[str, list[_Leaf]] = defaultdict(list)
        for leaf in self.leaves:
            if leaf.gpu_model == model and len(leaf.path) >= tier:
                groups[leaf.path[tier - 1]].append(leaf)
        return groups

    def max_units(self, job: JobRequest, model: str) -> int:
        """Units of the job this cluster could take if the job were alone in it."""
        g = job.gpus_per_pod
        if job.share_tier is not None:
            best = 0
            for leaves in self.domains(model, job.share_tier).values():
                best = max(best, self._units_in(leaves, job))
            return best
        return (
            self._units_in([x for x in self.leaves if x.gpu_model == model], job)
            if g
            else job.units
        )

    def _units_in(self, leaves: list[_Leaf], job: JobRequest) -> int:
        g = job.gpus_per_pod
        if job.unit_tier is None:
            return sum(x.slots(g) for x in leaves) // job.unit
        groups: dict[str, int] = defaultdict(int)
        for leaf in leaves:
            if len(leaf.path) >= job.unit_tier:
                groups[leaf.path[job.unit_tier - 1]] += leaf.slots(g)
        return sum(s // job.unit for s in groups.values())

    def place(self, job: JobRequest, units: int, model: str) -> list[tuple[str, int]] | None:
        """Take `units` units of the job; return (domain, pods) placements, or None and leave
        the pool unchanged when they do not fit."""
        if units <= 0:
            return []
        if job.gpus_per_pod == 0:
            return [(self.name, units * job.unit)]
        saved = [list(x.hist) for x in self.leaves]
        placed = self._place(job, units, model)
        if placed is None:
            for leaf, hist in zip(self.leaves, saved, strict=True):
                leaf.hist = hist
        return placed

    def _place(self, job: JobRequest, units: int, model: str) -> list[tuple[str, int]] | None:
        pods = units * job.unit
        if job.share_tier is not None:
            candidates = self.domains(model, job.share_tier)
            fitting = [
                (sum(x.slots(job.gpus_per_pod) for x in leaves), name, leaves)
                for name, leaves in candidates.items()
                if self._units_in(leaves, job) >= units
            ]
            for _, _, leaves in sorted(fitting, key=lambda f: (f[0], f[1])):
                placed = self._place_units(leaves, job, units)
                if placed is not None:
                    return placed
            return None
        return (
            self._place_units([x for x in self.leaves if x.gpu_model == model], job, units)
            if pods
            else []
        )

    def _place_units(
        self, leaves: list[_Leaf], job: JobRequest, units: int
    ) -> list[tuple[str, int]] | None:
        g = job.gpus_per_pod
        if job.unit_tier is None:
            return _take_pods(leaves, g, units * job.unit)
        placed: list[tuple[str, int]] = []
        for _ in range(units):
            groups: dict[str, list[_Leaf]] = defaultdict(list)
            for leaf in leaves:
                if len(leaf.path) >= job.unit_tier:
                    groups[leaf.path[job.unit_tier - 1]].append(leaf)
            fitting = sorted(
                (sum(x.slots(g) for x in group), name)
                for name, group in groups.items()
                if sum(x.slots(g) for x in group) >= job.unit
            )
            if not fitting:
                return None
            _, domain = fitting[0]
            taken = _take_pods(groups[domain], g, job.unit)
            if taken is None:
                return None
            placed.extend(taken)
        return _merge(placed)


def _take_pods(leaves: list[_Leaf], gpus_per_pod: int, pods: int) -> list[tuple[str, int]] | None:
    if sum(x.slots(gpus_per_pod) for x in leaves) < pods:
        return None
    placed: list[tuple[str, int]] = []
    for leaf in sorted(leaves, key=lambda x: (x.slots(gpus_per_pod), x.name)):
        if pods == 0:
            break
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
        if taken:
            placed.append((leaf.name, taken))
    return placed if pods == 0 else None


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
