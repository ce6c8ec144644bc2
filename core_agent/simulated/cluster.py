"""A simulated member cluster: nodes with GPUs, CPU and memory, grouped into HyperNode tiers.
It is a product feature (demo, what-if, benchmarks): its per-node usage is what running the
pods of assigned shares will change (the scheduling milestone). A share that stages its data
spends bytes * 8 / (Gbps * 1e9) simulated seconds (its slowest item's) Staging, as a Kubernetes
cluster runs its staging Job, before its pods are bound."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core_agent.inventory import Changes, Inventory, Usage
from core_agent.sources import CopyReport, Report
from volcano_global.clusterspec import layout
from volcano_global.clusterspec.spec import ClusterSpec
from volcano_global.rpc.copies import (
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
    DataCopyCancellation,
)
from volcano_global.rpc.shares import (
    HeldShare,
    ShareAssignment,
    ShareCancellation,
    SharePhase,
    ShareStatus,
)
from volcano_global.rpc.v1 import agent_pb2 as pb

# The SimNode fields that are what its pods use (`Changes.usages`).
_USAGE_FIELDS = {"used_gpus", "used_cpu_millis", "used_memory_bytes"}


@dataclass
class _RunningShare:
    assignment: ShareAssignment
    bound: list[tuple[str, int]]
    phase: SharePhase
    timer: asyncio.TimerHandle | None = None


@dataclass
class SimNode:
    name: str
    gpu_model: str
    gpus: int
    cpu_millis: int
    memory_bytes: int
    domain: str | None
    used_gpus: int = 0
    used_cpu_millis: int = 0
    used_memory_bytes: int = 0
    ready: bool = True
    schedulable: bool = True
    labels: dict[str, str] = field(default_factory=dict)

    def message(self) -> pb.Node:
        message = pb.Node(
            name=self.name,
            gpu_model=self.gpu_model,
            gpu_allocatable=self.gpus,
            gpu_used=self.used_gpus,
            cpu_allocatable_millis=self.cpu_millis,
            cpu_used_millis=self.used_cpu_millis,
            memory_allocatable_bytes=self.memory_bytes,
            memory_used_bytes=self.used_memory_bytes,
            ready=self.ready,
            schedulable=self.schedulable,
            domain=self.domain or "",
        )
        # A map given to the constructor costs even when empty (the protocol map's update is
        # Python's generic one; docs/benchmarks.md, "Deltas, session 9"): items set, if any.
        if self.labels:
            labels = message.labels
            for key, value in self.labels.items():
                labels[key] = value
        return message


class SimulatedCluster:
    """An `InventorySource` whose nodes live in memory. Change nodes through `update_node`,
    `add_node` and `remove_node` (they record what the next delta must carry)."""

    def __init__(
        self, name: str, nodes: list[SimNode], domains: list[pb.Domain], *, time_scale: float = 1.0
    ) -> None:
        self.name = name
        self.nodes = {n.name: n for n in nodes}
        self.domains = {d.name: d for d in domains}
        self.changed = asyncio.Event()
        self.time_scale = time_scale  # 0.01: a job of 100 s runs for 1 s
        self.start_delay_s = 0.0  # simulated seconds from binding to all pods running
        self.shares: dict[str, _RunningShare] = {}
        # Copies that belong to no share: where each stands, and its timer while it copies.
        self.copies: dict[str, tuple[CopyStatus, asyncio.TimerHandle | None]] = {}
        self._touched = Changes()

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_layout(cls, name: str, shape: layout.ClusterLayout) -> SimulatedCluster:
        nodes = [
            SimNode(
                n.name,
                n.gpu_model,
                n.gpus,
                n.cpu_millis,
                n.memory_bytes,
                n.domain,
                labels=dict(n.labels),
            )
            for n in shape.nodes
        ]
        domains = [
            pb.Domain(name=d.name, tier=d.tier, tier_name=d.tier_name, parent=d.parent or "")
            for d in shape.domains
        ]
        return cls(name, nodes, domains)

    @classmethod
    def from_spec(cls, name: str, spec: ClusterSpec) -> SimulatedCluster:
        return cls.from_layout(name, layout.from_spec(name, spec))

    @classmethod
    def from_yaml(cls, name: str, path: Path) -> SimulatedCluster:
        """A spec file: node groups and tiers, or `{lingjunBlock: N, gpuModel: M}` for a block
        of the real Lingjun fabric (as `--lingjun-block N --gpu-model M`)."""
        return cls.from_layout(name, layout.from_file(name, path))

    @classmethod
    def from_lingjun(
        cls, name: str, *, block: int = 0, gpu_model: str = "H800"
    ) -> SimulatedCluster:
        """One aggregation block (PSW) of the real Lingjun fabric (`clusterspec/layout.py`)."""
        return cls.from_layout(name, layout.from_lingjun(name, block=block, gpu_model=gpu_model))

    # -- InventorySource --------------------------------------------------------------------
    async def start(self) -> None:
        self.changed.set()

    async def stop(self) -> None:
        return None

    def current(self) -> Inventory:
        return Inventory(
            domains={name: _copy_domain(d) for name, d in self.domains.items()},
            nodes={name: n.message() for name, n in self.nodes.items()},
        )

    def take_changes(self) -> Changes:
        touched, self._touched = self._touched, Changes()
        return touched

    def view_of(self, changes: Changes) -> Inventory:
        return Inventory(
            domains={
                d: _copy_domain(self.domains[d]) for d in changes.domains if d in self.domains
            },
            nodes={n: self.nodes[n].message() for n in changes.nodes if n in self.nodes},
        )

    def usages_of(self, names: Iterable[str]) -> dict[str, Usage]:
        """What the pods of these nodes use now (those that still exist)."""
        nodes = self.nodes
        return {
            n: (node.used_gpus, node.used_cpu_millis, node.used_memory_bytes)
            for n in names
            if (node := nodes.get(n)) is not None
        }

    def _touch(self, *nodes: str) -> None:
        self._touched.nodes.update(nodes)
        self._touched.usages.difference_update(nodes)
        self.changed.set()

    def _touch_usage(self, *nodes: str) -> None:
        """Nodes whose usage alone changed (unless touched otherwise since the last report)."""
        touched = self._touched
        touched.usages.update(n for n in nodes if n not in touched.nodes)
        self.changed.set()

    # -- running assigned shares ---------------------------------------------------------------
    def apply_share(self, assignment: ShareAssignment, report: Report) -> None:
        """Stage the share's data if it has any (reported Staging), then bind its pods to nodes
        of its domains, start them after `start_delay_s`, run them for the job's duration, and
        report Accepted, Running, then Succeeded. Applying an assignment twice changes
        nothing."""
        existing = self.shares.get(assignment.placement_id)
        if existing is not None:
            report(self._status(assignment, existing.phase))
            return
        if not assignment.staging:
            self._accept(assignment, report)
            return
        share = _RunningShare(assignment=assignment, bound=[], phase=SharePhase.STAGING)
        self.shares[assignment.placement_id] = share
        report(self._status(assignment, SharePhase.STAGING))
        share.timer = asyncio.get_running_loop().call_later(
            assignment.staging_seconds * self.time_scale, self._staged, share, report
        )

    def _staged(self, share: _RunningShare, report: Report) -> None:
        """The copy is over: the share starts as one without staging would."""
        if self.shares.get(share.assignment.placement_id) is share:
            del self.shares[share.assignment.placement_id]
            self._accept(share.assignment, report)

    def _accept(self, assignment: ShareAssignment, report: Report) -> None:
        bound = self._bind(assignment)
        if bound is None:
            message = "not enough free GPUs in the assigned domains"
            report(self._status(assignment, SharePhase.FAILED, message))
            return
        share = _RunningShare(assignment=assignment, bound=bound, phase=SharePhase.ACCEPTED)
        self.shares[assignment.placement_id] = share
        report(self._status(assignment, SharePhase.ACCEPTED))
        if self.start_delay_s > 0:
            share.timer = asyncio.get_running_loop().call_later(
                self.start_delay_s * self.time_scale, self._start, share, report
            )
        else:
            self._start(share, report)

    def _start(self, share: _RunningShare, report: Report) -> None:
        share.phase = SharePhase.RUNNING
        report(self._status(share.assignment, SharePhase.RUNNING))
        share.timer = asyncio.get_running_loop().call_later(
            share.assignment.duration_seconds * self.time_scale,
            self._finish,
            share.assignment.placement_id,
            report,
        )

    # -- copies that belong to no share (prefetch) ---------------------------------------------
    def apply_copy(self, copy: DataCopyAssignment, report: CopyReport) -> None:
        """Copying for `bytes * 8 / gbps` simulated seconds (scaled by `time_scale`), then
        Succeeded. Applying a copy twice changes nothing: where it stands is reported again
        (in memory: a restarted simulated agent starts a copy sent again from the start)."""
        known = self.copies.get(copy.copy_id)
        if known is not None:
            report(known[0])
            return
        status = CopyStatus(copy_id=copy.copy_id, phase=CopyPhase.COPYING, bytes=copy.item.bytes)
        timer = asyncio.get_running_loop().call_later(
            copy.item.seconds * self.time_scale, self._copied, copy, report
        )
        self.copies[copy.copy_id] = (status, timer)
        report(status)

    def _copied(self, copy: DataCopyAssignment, report: CopyReport) -> None:
        done = CopyStatus(
            copy_id=copy.copy_id,
            phase=CopyPhase.SUCCEEDED,
            staged_bytes=copy.item.bytes,
            bytes=copy.item.bytes,
        )
        self.copies[copy.copy_id] = (done, None)
        report(done)

    def cancel_copy(self, cancel: DataCopyCancellation, report: CopyReport) -> None:
        known = self.copies.get(cancel.copy_id)
        if known is not None and known[0].phase.ended:
            report(known[0])  # it ended before the stop arrived: its end stands
            return
        if known is not None and known[1] is not None:
            known[1].cancel()
        stopped = CopyStatus(copy_id=cancel.copy_id, phase=CopyPhase.STOPPED, message=cancel.reason)
        self.copies[cancel.copy_id] = (stopped, None)
        report(stopped)

    def held_shares(self) -> list[HeldShare]:
        """Every share this cluster holds, finished ones too (in memory: a simulated agent that
        restarts is a cluster whose workloads are gone). Assignments apply as they arrive."""
        return [
            HeldShare(
                placement_id=pid,
                generation=share.assignment.generation,
                job_uid=share.assignment.job_uid,
                phase=share.phase,
            )
            for pid, share in self.shares.items()
        ]

    def cancel_share(self, cancellation: ShareCancellation, report: Report) -> None:
        share = self.shares.pop(cancellation.placement_id, None)
        if share is not None:
            if share.timer is not None:
                share.timer.cancel()
            self._release(share)
        report(
            ShareStatus(
                placement_id=cancellation.placement_id,
                job_uid=cancellation.job_uid,
                phase=SharePhase.CANCELLED,
            )
        )

    def _finish(self, placement_id: str, report: Report) -> None:
        share = self.shares.get(placement_id)
        if share is None or share.phase is not SharePhase.RUNNING:
            return
        share.phase = SharePhase.SUCCEEDED
        self._release(share)
        report(self._status(share.assignment, SharePhase.SUCCEEDED))

    def _bind(self, assignment: ShareAssignment) -> list[tuple[str, int]] | None:
        """(node, GPUs) for every pod, best fit inside each assigned domain."""
        g = assignment.gpus_per_pod
        bound: list[tuple[str, int]] = []
        for domain, pods in assignment.domains.items():
            candidates = [
                n
                for n in self.nodes.values()
                if n.domain == domain
                # The cluster as a whole: its nodes outside any domain, or every node for a
                # CPU-only share (the Global places those on the cluster, not in a domain).
                or (domain == self.name and (n.domain is None or g == 0))
            ]
            for _ in range(pods):
                fitting = [
                    n
                    for n in candidates
                    if n.ready
                    and n.gpus - n.used_gpus >= g
                    and (not assignment.gpu_model or n.gpu_model == assignment.gpu_model)
                ]
                if not fitting:
                    for node, gpus in bound:
                        self.nodes[node].used_gpus -= gpus
                    return None
                node = min(fitting, key=lambda n: (n.gpus - n.used_gpus, n.name))
                node.used_gpus += g
                bound.append((node.name, g))
        self._touch_usage(*(node for node, _ in bound))
        return bound

    def _release(self, share: _RunningShare) -> None:
        for node, gpus in share.bound:
            if node in self.nodes:
                self.nodes[node].used_gpus = max(self.nodes[node].used_gpus - gpus, 0)
        self._touch_usage(*(node for node, _ in share.bound))
        share.bound = []

    def _status(
        self, assignment: ShareAssignment, phase: SharePhase, message: str = ""
    ) -> ShareStatus:
        return ShareStatus(
            placement_id=assignment.placement_id,
            job_uid=assignment.job_uid,
            phase=phase,
            running=assignment.pods if phase is SharePhase.RUNNING else 0,
            succeeded=assignment.pods if phase is SharePhase.SUCCEEDED else 0,
            message=message,
            staging_bytes=assignment.staging_bytes if phase is SharePhase.STAGING else 0,
        )

    # -- changes ------------------------------------------------------------------------------
    def update_node(self, name: str, **changes: object) -> None:
        node = self.nodes[name]
        for key, value in changes.items():
            if not hasattr(node, key):
                raise AttributeError(f"SimNode has no field {key!r}")
            setattr(node, key, value)
        if changes.keys() <= _USAGE_FIELDS:
            self._touch_usage(name)
        else:
            self._touch(name)

    def add_node(self, node: SimNode) -> None:
        self.nodes[node.name] = node
        self._touch(node.name)

    def remove_node(self, name: str) -> None:
        del self.nodes[name]
        self._touch(name)


def _copy_domain(domain: pb.Domain) -> pb.Domain:
    copy = pb.Domain()
    copy.CopyFrom(domain)
    return copy
