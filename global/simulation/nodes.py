"""The simulated fleet's nodes: free GPUs per node, grouped by (cluster, leaf domain, GPU
model), what the solver sees of them (free-GPU histograms per leaf), and binding pods to them
best-fit inside a leaf, as the simulated agent does."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from volcano_global.simulation.scenario import Scenario
from volcano_global.solver import ClusterCapacity, Leaf

Key = tuple[str, str, str]  # (cluster, leaf domain, GPU model)
Bound = tuple[str, str, str, int, int]  # (cluster, leaf, model, node index, GPUs)


@dataclass
class Node:
    gpus: int
    free: int


class Fleet:
    def __init__(self, scenario: Scenario) -> None:
        self.nodes: dict[Key, list[Node]] = defaultdict(list)
        self.paths: dict[tuple[str, str], tuple[str, ...]] = {}
        for entry in scenario.clusters:
            cluster = entry.build()
            parents = {d.name: d.parent for d in cluster.domains}
            for node in cluster.nodes:
                if node.gpus == 0:
                    continue
                leaf = node.domain or entry.name
                self.nodes[(entry.name, leaf, node.gpu_model)].append(Node(node.gpus, node.gpus))
                path, current = [], node.domain
                while current:
                    path.append(current)
                    current = parents.get(current) or None
                self.paths[(entry.name, leaf)] = tuple(path)
        self.cluster_names = [c.name for c in scenario.clusters]
        self.capacity_gpus = sum(n.gpus for ns in self.nodes.values() for n in ns)
        self.cluster_gpus = {name: 0 for name in self.cluster_names}
        for (cluster, _, _), nodes in self.nodes.items():
            self.cluster_gpus[cluster] += sum(n.gpus for n in nodes)

    def bind(
        self, cluster: str, leaf: str, gpu_model: str | None, gpus_per_pod: int, pods: int
    ) -> list[Bound] | None:
        """Pods on the nodes of the leaf with the fewest free GPUs that hold one; None (and
        nothing bound) if they do not all fit."""
        keys = [
            k for k in self.nodes if k[0] == cluster and k[1] == leaf and gpu_model in (None, k[2])
        ]
        got: list[Bound] = []
        for _ in range(pods):
            best = None
            for key in keys:
                for i, node in enumerate(self.nodes[key]):
                    if node.free >= gpus_per_pod and (best is None or node.free < best[2]):
                        best = (key, i, node.free)
            if best is None:
                self.unbind(got)
                return None
            key, i, _ = best
            self.nodes[key][i].free -= gpus_per_pod
            got.append((key[0], key[1], key[2], i, gpus_per_pod))
        return got

    def unbind(self, bound: list[Bound]) -> None:
        for cluster, leaf, model, i, gpus in bound:
            self.nodes[(cluster, leaf, model)][i].free += gpus

    def take(self, pods: list[Bound]) -> bool:
        """Bind exactly these pods again (the same nodes), if every one still has room."""
        if any(self.nodes[(c, leaf, m)][i].free < g for c, leaf, m, i, g in pods):
            return False
        for c, leaf, m, i, g in pods:
            self.nodes[(c, leaf, m)][i].free -= g
        return True

    def allocated(self) -> int:
        return sum(n.gpus - n.free for ns in self.nodes.values() for n in ns)

    def free_gpus(self) -> tuple[dict[tuple[str, str | None], int], dict[str, tuple[str, ...]]]:
        """Free GPUs per (cluster, model), and each cluster's models."""
        free: dict[tuple[str, str | None], int] = defaultdict(int)
        models: dict[str, set[str]] = defaultdict(set)
        for (cluster, _, model), nodes in self.nodes.items():
            free[(cluster, model)] += sum(n.free for n in nodes)
            models[cluster].add(model)
        return dict(free), {c: tuple(sorted(m)) for c, m in models.items()}

    def capacities(self) -> tuple[ClusterCapacity, ...]:
        """What the solver sees: per leaf and model, a histogram of nodes by free GPUs."""
        leaves: dict[str, list[Leaf]] = defaultdict(list)
        for (cluster, leaf, model), nodes in sorted(self.nodes.items()):
            hist = [0] * (max(n.gpus for n in nodes) + 1)
            for node in nodes:
                hist[node.free] += 1
            leaves[cluster].append(
                Leaf(
                    model,
                    tuple(hist),
                    self.paths.get((cluster, leaf), ()),
                    node_gpus=max(n.gpus for n in nodes),
                )
            )
        return tuple(ClusterCapacity(name, tuple(leaves[name])) for name in self.cluster_names)
