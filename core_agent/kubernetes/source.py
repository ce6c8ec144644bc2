"""`KubernetesSource`: the inventory of a real member cluster. Nodes give allocatable
resources, readiness and the GPU model; bound, non-terminal Pods give what is used on each node;
HyperNodes (topology.volcano.sh/v1alpha1) give the topology tree, or, where the CRD is absent,
configurable node labels do (as Volcano's label-based discovery)."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from decimal import Decimal
from typing import Any

from core_agent.inventory import Changes, Inventory
from core_agent.kubernetes.adapter import Kind, KubeApi
from core_agent.kubernetes.shares import VOLCANO_JOBS, MemberJobs
from core_agent.kubernetes.watcher import Progress, Store, watch_forever
from core_agent.sources import Report
from volcano_global.jobspec.fields import Checker
from volcano_global.jobspec.pods import GPU_MODEL_LABEL, is_accelerator, pod_resources
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.rpc.shares import ShareAssignment, ShareCancellation
from volcano_global.rpc.v1 import agent_pb2 as pb

NODES = Kind("nodes")
BOUND_PODS = Kind(
    "pods", field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
)
HYPERNODES = Kind("hypernodes")


class KubernetesSource:
    """`watch_timeout_s` is the shortest a watch asks to last (each lasts up to twice that)."""

    name = "kubernetes"

    def __init__(
        self,
        api: KubeApi,
        *,
        tier_labels: list[str] | None = None,
        page_size: int = 500,
        watch_timeout_s: int = 300,
        global_api: str = "",
    ) -> None:
        self.api = api
        self.tier_labels = tier_labels or []
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.nodes: Store = {}
        self.pods: Store = {}
        self.hypernodes: Store = {}
        self.changed = asyncio.Event()
        self.shares = MemberJobs(api, global_api=global_api)
        kinds = (NODES, BOUND_PODS, HYPERNODES, VOLCANO_JOBS)
        self._synced = {kind.name: asyncio.Event() for kind in kinds}
        self.progress = {kind.name: Progress() for kind in kinds}  # lists, watches, events
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for kind, store in (
            (NODES, self.nodes),
            (BOUND_PODS, self.pods),
            (HYPERNODES, self.hypernodes),
            (VOLCANO_JOBS, self.shares.store),
        ):
            self._tasks.append(
                asyncio.create_task(
                    watch_forever(
                        self.api,
                        kind,
                        store,
                        self._notifier(kind.name),
                        page_size=self.page_size,
                        watch_timeout_s=self.watch_timeout_s,
                        progress=self.progress[kind.name],
                    ),
                    name=f"watch-{kind.name}",
                )
            )
        await asyncio.gather(*(event.wait() for event in self._synced.values()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.shares.stop()

    # -- shares of global jobs (Volcano Jobs) ----------------------------------------------------
    def bind_reporter(self, report: Report) -> None:
        self.shares.bind_reporter(report)

    def apply_share(self, assignment: ShareAssignment, report: Report) -> None:
        self.shares.apply_share(assignment, report)

    def cancel_share(self, cancellation: ShareCancellation, report: Report) -> None:
        self.shares.cancel_share(cancellation, report)

    def _notifier(self, kind: str):  # type: ignore[no-untyped-def]
        def changed() -> None:
            self._synced[kind].set()
            if kind == VOLCANO_JOBS.name:
                self.shares.refresh()
            else:
                self.changed.set()

        return changed

    def current(self) -> Inventory:
        domains, node_domain = (
            _hypernode_tree(self.hypernodes, self.nodes)
            if self.hypernodes
            else _label_tree(self.nodes, self.tier_labels)
        )
        used = _usage(self.pods)
        inventory = Inventory(domains=domains)
        for obj in self.nodes.values():
            name = obj["metadata"]["name"]
            inventory.nodes[name] = _node(obj, used.get(name, {}), node_domain.get(name))
        return inventory

    def take_changes(self) -> None:
        # The watches report that something moved, not which node it touched (a pod moves its
        # node's usage, a label or a HyperNode can move many nodes' domains): the agent compares
        # the whole inventory.
        return None

    def view_of(self, changes: Changes) -> Inventory:
        whole = self.current()
        return Inventory(
            domains={d: whole.domains[d] for d in changes.domains if d in whole.domains},
            nodes={n: whole.nodes[n] for n in changes.nodes if n in whole.nodes},
        )


def _node(obj: dict[str, Any], used: dict[str, Decimal], domain: str | None) -> pb.Node:
    meta, spec, status = obj["metadata"], obj.get("spec", {}), obj.get("status", {})
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    gpu_resource = next((r for r in allocatable if is_accelerator(r)), None)
    labels = meta.get("labels") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
    )
    return pb.Node(
        name=meta["name"],
        gpu_model=labels.get(GPU_MODEL_LABEL, "") if gpu_resource else "",
        gpu_allocatable=int(_quantity(allocatable.get(gpu_resource, 0))) if gpu_resource else 0,
        gpu_used=int(used.get("gpu", 0)),
        cpu_allocatable_millis=int(_quantity(allocatable.get("cpu", 0)) * 1000),
        cpu_used_millis=int(used.get("cpu_millis", 0)),
        memory_allocatable_bytes=int(_quantity(allocatable.get("memory", 0))),
        memory_used_bytes=int(used.get("memory_bytes", 0)),
        ready=ready,
        schedulable=not spec.get("unschedulable", False),
        domain=domain or "",
        labels={k: v for k, v in labels.items() if isinstance(v, str)},
        taints=[
            pb.Taint(key=t.get("key", ""), value=t.get("value", ""), effect=t.get("effect", ""))
            for t in spec.get("taints", [])
        ],
    )


def _usage(pods: Store) -> dict[str, dict[str, Decimal]]:
    """Requests of the bound, non-terminal pods per node."""
    used: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for pod in pods.values():
        node = pod.get("spec", {}).get("nodeName")
        if not node or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        resources = pod_resources({"spec": pod.get("spec", {})}, "", Checker())
        used[node]["gpu"] += resources.gpus
        used[node]["cpu_millis"] += resources.cpu_millis
        used[node]["memory_bytes"] += resources.memory_bytes
    return used


def _hypernode_tree(hypernodes: Store, nodes: Store) -> tuple[dict[str, pb.Domain], dict[str, str]]:
    """Domains from HyperNodes; each node's domain is the lowest-tier HyperNode selecting it."""
    by_name = {h["metadata"]["name"]: h for h in hypernodes.values()}
    domains: dict[str, pb.Domain] = {}
    parent: dict[str, str] = {}
    node_domain: dict[str, tuple[int, str]] = {}
    for name, hypernode in sorted(by_name.items()):
        spec = hypernode.get("spec", {})
        tier = int(spec.get("tier", 1))
        domains[name] = pb.Domain(name=name, tier=max(tier, 1), tier_name=spec.get("tierName", ""))
        for member in spec.get("members", []):
            selector = member.get("selector", {})
            if member.get("type", "Node") == "HyperNode":
                for child in by_name:
                    if _selects(selector, child, {}):
                        parent[child] = name
            else:
                exact = selector.get("exactMatch", {}).get("name")
                candidates = (
                    [nodes[f"/{exact}"]]
                    if exact and f"/{exact}" in nodes
                    else []
                    if exact
                    else nodes.values()
                )
                for obj in candidates:
                    node_name = obj["metadata"]["name"]
                    if _selects(selector, node_name, obj["metadata"].get("labels") or {}):
                        if node_name not in node_domain or (tier, name) < node_domain[node_name]:
                            node_domain[node_name] = (tier, name)
    for child, name in parent.items():
        if child in domains and domains[name].tier > domains[child].tier:
            domains[child].parent = name
    return domains, {node: name for node, (_, name) in node_domain.items()}


def _selects(selector: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    if "exactMatch" in selector:
        return selector["exactMatch"].get("name") == name
    if "regexMatch" in selector:
        return re.fullmatch(selector["regexMatch"].get("pattern", ""), name) is not None
    if "labelMatch" in selector:
        wanted = selector["labelMatch"].get("matchLabels", {})
        return all(labels.get(k) == v for k, v in wanted.items())
    return False


def _label_tree(
    nodes: Store, tier_labels: list[str]
) -> tuple[dict[str, pb.Domain], dict[str, str]]:
    """Tier i + 1 = the value of `tier_labels[i]` (e.g. rack, then zone), as Volcano's label
    discovery does when no HyperNodes exist."""
    domains: dict[str, pb.Domain] = {}
    node_domain: dict[str, str] = {}
    for obj in nodes.values():
        labels = obj["metadata"].get("labels") or {}
        path = [f"{key.rsplit('/', 1)[-1]}-{labels[key]}" for key in tier_labels if key in labels]
        if len(path) != len(tier_labels) or not path:
            continue
        for tier, name in enumerate(path, start=1):
            parent = path[tier] if tier < len(path) else ""
            domains.setdefault(
                name,
                pb.Domain(name=name, tier=tier, tier_name=tier_labels[tier - 1], parent=parent),
            )
        node_domain[obj["metadata"]["name"]] = path[0]
    return domains, node_domain


def _quantity(value: object) -> Decimal:
    try:
        return parse_quantity(value)
    except ValueError:
        return Decimal(0)
