"""`KubernetesSource`: the inventory of a real member cluster. Nodes give allocatable
resources, readiness and the GPU model; bound, non-terminal Pods give what is used on each node;
HyperNodes (topology.volcano.sh/v1alpha1) give the topology tree, or, where the CRD is absent,
configurable node labels do (as Volcano's label-based discovery)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from core_agent.inventory import Changes, Inventory
from core_agent.kubernetes.adapter import HYPERNODE, Kind, KubeApi
from core_agent.kubernetes.copies import Copies
from core_agent.kubernetes.held import held_shares
from core_agent.kubernetes.hypernodes import HyperNodeTopology
from core_agent.kubernetes.presence import DataHeld
from core_agent.kubernetes.shares import VOLCANO_JOBS, MemberJobs
from core_agent.kubernetes.staging import STAGING_JOBS, StagingConfig
from core_agent.kubernetes.watcher import Progress, Store, watch_forever
from core_agent.sources import CopyReport, Report
from volcano_global.jobspec.accelerators import VOLCANO_VGPU, is_accelerator, node_model
from volcano_global.jobspec.fields import Checker
from volcano_global.jobspec.pods import pod_resources
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.rpc.copies import DataCopyAssignment, DataCopyCancellation
from volcano_global.rpc.shares import HeldShare, ShareAssignment, ShareCancellation
from volcano_global.rpc.v1 import agent_pb2 as pb

NODES = Kind("nodes")
BOUND_PODS = Kind(
    "pods", field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
)
HYPERNODES = Kind("hypernodes")
log = logging.getLogger(__name__)
VGPU_REGISTER = "volcano.sh/node-vgpu-register"  # the vGPU device plugin's GPUs of a node


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
        staging: StagingConfig | None = None,
    ) -> None:
        self.api = api
        self.tier_labels = tier_labels or []
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.nodes: Store = {}
        self.pods: Store = {}
        self.hypernodes: Store = {}
        self.topology = HyperNodeTopology(on_problem=self._hypernode_problem)
        self._events: set[asyncio.Task[None]] = set()
        self.changed = asyncio.Event()
        self.shares = MemberJobs(
            api, global_api=global_api, staging=staging, nodes=lambda: self.nodes.values()
        )
        # Copies that belong to no share, in the namespaces shares may use.
        self.copies = Copies(self.shares.stager, own_namespace=self.shares.own_namespace)
        self.data = DataHeld()  # labelled PVCs and Fluid Datasets (presence.py)
        kinds = (NODES, BOUND_PODS, HYPERNODES, VOLCANO_JOBS, STAGING_JOBS)
        self._synced = {kind.name: asyncio.Event() for kind in kinds}
        self.progress = {  # lists, watches, events
            kind.name: Progress() for kind in (*kinds, *(k for k, _ in self.data.watched()))
        }
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for kind, store in (
            (NODES, self.nodes),
            (BOUND_PODS, self.pods),
            (HYPERNODES, self.hypernodes),
            (VOLCANO_JOBS, self.shares.store),
            (STAGING_JOBS, self.shares.stager.store),
        ):
            self._watch(kind, store, self._notifier(kind.name))
        # The data the cluster holds is not waited for: an agent whose RBAC predates it (no
        # PVC list) still runs shares; what it finds later is reported when it is found.
        for kind, store in self.data.watched():
            self._watch(kind, store, self.changed.set)
        await asyncio.gather(*(event.wait() for event in self._synced.values()))

    def _watch(self, kind: Kind, store: Store, on_change: Callable[[], None]) -> None:
        self._tasks.append(
            asyncio.create_task(
                watch_forever(
                    self.api,
                    kind,
                    store,
                    on_change,
                    page_size=self.page_size,
                    watch_timeout_s=self.watch_timeout_s,
                    progress=self.progress[kind.name],
                ),
                name=f"watch-{kind.name}",
            )
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.shares.stop()
        await self.copies.stop()

    # -- shares of global jobs (Volcano Jobs) ----------------------------------------------------
    def bind_reporter(self, report: Report) -> None:
        self.shares.bind_reporter(report)

    def apply_share(self, assignment: ShareAssignment, report: Report) -> None:
        self.shares.apply_share(assignment, report)

    def cancel_share(self, cancellation: ShareCancellation, report: Report) -> None:
        self.shares.cancel_share(cancellation, report)

    def apply_copy(self, copy: DataCopyAssignment, report: CopyReport) -> None:
        self.copies.apply_copy(copy, report)

    def cancel_copy(self, cancel: DataCopyCancellation, report: CopyReport) -> None:
        self.copies.cancel_copy(cancel, report)

    def held_shares(self) -> list[HeldShare]:
        """Every share the cluster holds: its Volcano Jobs by their placement label."""
        shares = self.shares
        return held_shares(shares.store, applying=shares.applying, cancelled=shares.cancelled)

    def data_present(self) -> set[str]:
        """The data sources the cluster holds (docs/data.md, "Agent label convention")."""
        return self.data.present()

    def _notifier(self, kind: str):  # type: ignore[no-untyped-def]
        def changed() -> None:
            self._synced[kind].set()
            if kind == VOLCANO_JOBS.name:
                self.shares.refresh()
            elif kind == STAGING_JOBS.name:
                self.shares.stager.refresh()
            else:
                self.changed.set()

        return changed

    def _hypernode_problem(self, hypernode: str, problem: str) -> None:
        """An Event on the HyperNode (`kubectl describe hypernode` shows it)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # resolved outside the agent's loop (a tool): the log only
            return
        task = loop.create_task(self._event_on_hypernode(hypernode, problem))
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def _event_on_hypernode(self, hypernode: str, problem: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            # Events of cluster-scoped objects live in "default", as the kubelet's for nodes.
            "metadata": {"name": f"{hypernode}.{uuid.uuid4().hex[:16]}", "namespace": "default"},
            "involvedObject": {
                "apiVersion": f"{HYPERNODE[0]}/{HYPERNODE[1]}",
                "kind": "HyperNode",
                "name": hypernode,
            },
            "reason": "MemberUnresolvable",
            "message": problem[:1024],
            "type": "Warning",
            "source": {"component": "volcano-global-agent"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.api.create_event("default", body)
        except Exception as exc:  # the warning is logged already; the Event is a courtesy
            log.info("could not record an Event on HyperNode %s: %s", hypernode, exc)

    def current(self) -> Inventory:
        domains, node_domain = (
            self.topology.resolve(self.hypernodes.values(), self.nodes.values())
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
    labels = meta.get("labels") or {}
    gpu_resource, gpus = _accelerators(allocatable, meta.get("annotations") or {})
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
    )
    return pb.Node(
        name=meta["name"],
        gpu_model=node_model(gpu_resource, labels) if gpu_resource else "",
        gpu_allocatable=gpus,
        # Pods may hold more than a node now offers (a device turned unhealthy under them, or
        # vGPU pods sharing a GPU): the node is full, not over-full.
        gpu_used=min(int(used.get("gpu", 0)), gpus),
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


def _accelerators(allocatable: dict[str, Any], annotations: dict[str, Any]) -> tuple[str, int]:
    """The node's accelerator resource and its physical devices. Whole devices first: a vGPU
    resource counts its GPUs, not its slices."""
    offered = sorted(
        (r == VOLCANO_VGPU, r)
        for r in allocatable
        if is_accelerator(r) and _quantity(allocatable[r]) > 0
    )
    if not offered:
        return "", 0
    resource = offered[0][1]
    if resource == VOLCANO_VGPU:
        return resource, _vgpu_devices(annotations.get(VGPU_REGISTER))
    return resource, int(_quantity(allocatable[resource]))


def _vgpu_devices(register: Any) -> int:
    """Healthy GPUs in the vGPU device plugin's register annotation, read as Volcano reads it
    (`uuid,count,memory,type,health,mode` per GPU, `:`-separated). Volcano schedules no vGPU on
    a node without it (nor with a malformed one), so such a node has no GPUs here."""
    if not isinstance(register, str) or ":" not in register:
        return 0
    devices = [entry.split(",") for entry in register.split(":") if "," in entry]
    if any(len(items) < 6 for items in devices):
        return 0
    return sum(items[4] in ("1", "t", "T", "true", "TRUE", "True") for items in devices)


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
