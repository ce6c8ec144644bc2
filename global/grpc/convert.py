"""Agent protocol messages -> validated schemas and reports, with errors that name the message
field."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError

from volcano_global.errors import Invalid, field_error
from volcano_global.grpc.node_checks import checked_nodes, checked_usages
from volcano_global.rpc.shares import SharePhase
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.schemas.clusters import InventoryDelta, InventorySnapshot
from volcano_global.services.dispatch.reports import WARNING_PREFIX, ShareReport
from volcano_global.services.inventory.node_values import (
    CheckedDelta,
    CheckedSnapshot,
    NodeUsage,
    NodeValues,
    checked_delta,
    checked_snapshot,
)

# The largest sequence number the databases store (a signed 64-bit integer; the protocol's is
# unsigned): above it an agent's message is refused here, not by the driver mid-transaction.
SEQ_MAX = 2**63 - 1


def snapshot_from(message: pb.InventorySnapshot) -> CheckedSnapshot:
    """The snapshot checked: its nodes without a model each when they are plainly valid
    (`node_checks`), else through the schema, whose error names the field."""
    _require_seq(message.seq, "snapshot.seq")
    nodes = checked_nodes(message.nodes)
    domains = [_domain(d) for d in message.domains]
    if nodes is not None:
        # The domains (a few per hundred nodes) go through the schema, checked on their own.
        shell = _validate(InventorySnapshot, {"domains": domains}, "snapshot")
        known = {d.name for d in shell.domains}
        if all(n.domain is None or n.domain in known for n in nodes):
            return CheckedSnapshot(shell.domains, nodes)
    payload = {"domains": domains, "nodes": [_node(n) for n in message.nodes]}
    return checked_snapshot(_validate(InventorySnapshot, payload, "snapshot"))


def delta_from(message: pb.InventoryDelta) -> CheckedDelta:
    """The delta checked, as `snapshot_from`."""
    _require_seq(message.seq, "delta.seq")
    nodes = checked_nodes(message.node_upserts)
    usages = checked_usages(message.node_usages) if len(message.node_usages) else []
    payload: dict[str, Any] = {
        "node_removals": list(message.node_removals),
        "domain_upserts": [_domain(d) for d in message.domain_upserts],
        "domain_removals": list(message.domain_removals),
    }
    if nodes is not None and usages is not None:
        shell = _validate(InventoryDelta, payload, "delta")
        if _disjoint(nodes, shell.node_removals, usages):
            return CheckedDelta(
                nodes, shell.node_removals, shell.domain_upserts, shell.domain_removals, usages
            )
    payload["node_upserts"] = [_node(n) for n in message.node_upserts]
    payload["node_usages"] = [_usage(u) for u in message.node_usages]
    return checked_delta(_validate(InventoryDelta, payload, "delta"))


def _disjoint(nodes: list[NodeValues], removals: list[str], usages: list[NodeUsage]) -> bool:
    """Whether no node is named in two of a delta's lists (the schema says which when one is)."""
    if not removals and not usages:
        return True
    upserted = {n.name for n in nodes}
    named = upserted | set(removals)
    return not (upserted & set(removals)) and not any(u.name in named for u in usages)


def _require_seq(seq: int, field: str) -> None:
    if seq > SEQ_MAX:
        raise Invalid.one(field, f"must be at most {SEQ_MAX} (a signed 64-bit integer), got {seq}")


def share_report_from(cluster_id: uuid.UUID, message: pb.JobStatusReport) -> ShareReport:
    try:
        placement_id = uuid.UUID(message.placement_id)
    except ValueError:
        raise Invalid.one(
            "job_status.placement_id", f"not a placement id: {message.placement_id!r}"
        ) from None
    if message.phase == pb.SHARE_PHASE_UNSPECIFIED and message.phase_name:
        return _share_report_of_old_agent(cluster_id, placement_id, message)
    try:
        phase = SharePhase.from_proto(message.phase)
    except ValueError as exc:
        raise Invalid.one("job_status.phase", str(exc)) from None
    return ShareReport(
        cluster_id,
        placement_id,
        phase,
        message.message,
        message.warning,
        staged_bytes=message.staged_bytes,
        staging_bytes=message.staging_bytes,
    )


def _share_report_of_old_agent(
    cluster_id: uuid.UUID, placement_id: uuid.UUID, message: pb.JobStatusReport
) -> ShareReport:
    """A report of an agent of the release before `SharePhase` (kept for one release): the
    phase by name, a warning as a prefix of the message."""
    try:
        phase = SharePhase(message.phase_name)
        if phase is SharePhase.ASSIGNED:  # the Global's own phase, never reported
            raise ValueError(phase)
    except ValueError:
        known = ", ".join(p.value for p in SharePhase if p is not SharePhase.ASSIGNED)
        raise Invalid.one(
            "job_status.phase_name", f"unknown phase {message.phase_name!r}: one of {known}"
        ) from None
    text, warning = message.message, message.warning
    if not warning and text.startswith(WARNING_PREFIX):
        text, warning = "", text.removeprefix(WARNING_PREFIX)
    return ShareReport(cluster_id, placement_id, phase, text, warning)


def _node(node: pb.Node) -> dict[str, Any]:
    return {
        "name": node.name,
        "gpu_model": node.gpu_model or None,
        "gpu_allocatable": node.gpu_allocatable,
        "gpu_used": node.gpu_used,
        "cpu_allocatable_millis": node.cpu_allocatable_millis,
        "cpu_used_millis": node.cpu_used_millis,
        "memory_allocatable_bytes": node.memory_allocatable_bytes,
        "memory_used_bytes": node.memory_used_bytes,
        "ready": node.ready,
        "schedulable": node.schedulable,
        "domain": node.domain or None,
        "labels": dict(node.labels),
        "taints": [
            {"key": t.key, "value": t.value or None, "effect": t.effect} for t in node.taints
        ],
    }


def _usage(usage: pb.NodeUsage) -> dict[str, Any]:
    return {
        "name": usage.name,
        "gpu_used": usage.gpu_used,
        "cpu_used_millis": usage.cpu_used_millis,
        "memory_used_bytes": usage.memory_used_bytes,
    }


def _domain(domain: pb.Domain) -> dict[str, Any]:
    return {
        "name": domain.name,
        "tier": domain.tier,
        "tier_name": domain.tier_name or None,
        "parent": domain.parent or None,
    }


def _validate(schema, data: dict[str, Any], prefix: str):  # type: ignore[no-untyped-def]
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()[:20]
        raise Invalid([field_error(e["loc"], e["msg"], prefix=prefix) for e in errors]) from None
