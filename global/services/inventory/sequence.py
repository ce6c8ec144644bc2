"""The order of an agent's inventory deltas: each carries the next sequence number after the
cluster's applied one. A delta already applied (a resend after a reconnect) is skipped; a gap,
or a delta before any snapshot, asks the agent to resync with a snapshot. Transport-neutral:
the gRPC servicer turns the outcome into its ack and resync messages."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import agent_seen
from volcano_global.services.inventory.deltas import (
    ClusterDelta,
    apply_delta,
    apply_node_deltas,
    merged,
)
from volcano_global.services.inventory.node_changes import store_seq
from volcano_global.services.inventory.node_usages import StaleUsage, require_known
from volcano_global.services.inventory.node_values import CheckedDelta, checked_delta
from volcano_global.services.inventory.stored_nodes import stored_names


@dataclass(frozen=True)
class NumberedDelta:
    seq: int
    delta: InventoryDelta | CheckedDelta


@dataclass(frozen=True)
class Resync:
    """The agent must send a snapshot: why, and the last sequence number applied."""

    reason: str
    applied_seq: int


@dataclass(frozen=True)
class DeltasOutcome:
    acked_seq: int | None  # the sequence number to acknowledge; None: nothing to acknowledge
    resync: Resync | None = None


def snapshot_required(cluster: Cluster) -> bool:
    """Deltas apply on top of an inventory: a cluster without one must first send a snapshot."""
    return cluster.inventory_generation == 0


async def apply_in_sequence(
    session: AsyncSession,
    *,
    cluster: Cluster,
    deltas: list[NumberedDelta],
    max_nodes: int | None = None,
) -> DeltasOutcome:
    """Apply consecutive deltas in the caller's transaction, the cluster's row locked: those
    already applied are skipped, the rest must follow on in sequence (the first that does not
    asks for a resync, and neither it nor those after it apply). The deltas that follow on
    apply merged (`deltas.merged`), all stamped with the last one's number, which the cluster
    stores even when they change nothing."""
    (outcome,) = await apply_runs_in_sequence(
        session, runs=[ClusterRun(cluster, deltas)], max_nodes=max_nodes
    )
    return outcome


@dataclass(frozen=True)
class ClusterRun:
    """Consecutive deltas of one cluster, its row locked by the caller."""

    cluster: Cluster
    deltas: list[NumberedDelta]


async def apply_runs_in_sequence(
    session: AsyncSession, *, runs: list[ClusterRun], max_nodes: int | None = None
) -> list[DeltasOutcome]:
    """`apply_in_sequence` for runs of distinct clusters in one transaction: the node-only
    changes of all of them apply together (`deltas.apply_node_deltas`); a run with a
    HyperNode change applies on its own."""
    outcomes, together = [], []
    for n, run in enumerate(runs):
        cluster = run.cluster
        outcome, fresh = _in_sequence(cluster, run.deltas)
        outcomes.append(outcome)
        if not fresh:
            continue
        await agent_seen(session, cluster=cluster)  # as good as a heartbeat
        last = cluster.inventory_seq + len(fresh)
        try:
            pieces = merged(fresh)
            if len(pieces) == 1 and not (pieces[0].domain_upserts or pieces[0].domain_removals):
                together.append((n, ClusterDelta(cluster, pieces[0], last)))
                continue
            await _require_known_usages(session, cluster, pieces)
        except StaleUsage as exc:
            outcomes[n] = _stale(cluster, exc)
            continue
        for delta in pieces:
            await apply_delta(session, cluster=cluster, delta=delta, seq=last, max_nodes=max_nodes)
        # Empty deltas merge to nothing, yet their number is acknowledged: it is stored in
        # this transaction too, or the next delta would look like a gap.
        store_seq(cluster, last)
    if together:
        run_of = {id(d): n for n, d in together}
        stale = await apply_node_deltas(session, [d for _, d in together], max_nodes=max_nodes)
        for delta, exc in stale:
            outcomes[run_of[id(delta)]] = _stale(delta.cluster, exc)
    await session.flush()
    return outcomes


def _stale(cluster: Cluster, exc: StaleUsage) -> DeltasOutcome:
    """A run with a usage of a node the cluster does not hold: nothing of it applied, the
    agent asked for a snapshot."""
    return DeltasOutcome(None, Resync(exc.message, cluster.inventory_seq))


async def _require_known_usages(
    session: AsyncSession, cluster: Cluster, pieces: list[CheckedDelta]
) -> None:
    """Before a run of several pieces writes any: each usage names a node held by then."""
    names = {u.name for piece in pieces for u in piece.node_usages}
    if names:
        require_known(pieces, await stored_names(session, cluster.id, names))


def _in_sequence(
    cluster: Cluster, deltas: list[NumberedDelta]
) -> tuple[DeltasOutcome, list[CheckedDelta]]:
    """What to answer, and the deltas that follow on from the cluster's applied one."""
    applied = cluster.inventory_seq
    if snapshot_required(cluster):
        return DeltasOutcome(None, Resync("no inventory yet: send a snapshot", applied)), []
    fresh: list[CheckedDelta] = []
    resync = None
    for numbered in deltas:
        expected = applied + len(fresh) + 1
        if numbered.seq < expected:
            continue  # a duplicate: already applied
        if numbered.seq != expected:
            resync = Resync(f"gap: expected seq {expected}, got {numbered.seq}", expected - 1)
            break
        fresh.append(checked_delta(numbered.delta))
    if resync is not None and not fresh:
        return DeltasOutcome(None, resync), []  # nothing new is applied: only the resync
    return DeltasOutcome(applied + len(fresh), resync), fresh
