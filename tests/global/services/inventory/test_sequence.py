"""The order of an agent's inventory deltas, as the service applies them (SQLite and Postgres,
no stream): before a snapshot every delta asks for one; a resent delta changes nothing; the
deltas after a gap are not applied and the agent is told from where to resync."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tests.factories import inventory
from volcano_global.db.engine import create_engine, create_session_factory, transaction
from volcano_global.db.models import Cluster, ClusterState, NodeUse
from volcano_global.schemas.clusters import InventoryDelta, InventorySnapshot
from volcano_global.services.inventory.clusters import lock_cluster, register_cluster
from volcano_global.services.inventory.sequence import (
    DeltasOutcome,
    NumberedDelta,
    Resync,
    apply_in_sequence,
)
from volcano_global.services.inventory.snapshots import replace_inventory

INVENTORY = inventory("east", tors=1, nodes_per_tor=1)  # one node of 8 GPUs under a ToR
NODE = INVENTORY["nodes"][0]


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_engine(database_url)
    async with transaction(factory := create_session_factory(engine)) as session:
        await register_cluster(session, name="east", description="", labels={})
    yield factory
    await engine.dispose()


def used(seq: int, gpus: int) -> NumberedDelta:
    """The delta numbered `seq`: the node now has `gpus` GPUs in use."""
    node = NODE | {"gpuUsed": gpus}
    return NumberedDelta(seq, InventoryDelta.model_validate({"nodeUpserts": [node]}))


async def send(sessions: async_sessionmaker[AsyncSession], *deltas: NumberedDelta) -> DeltasOutcome:
    async with transaction(sessions) as session:
        cluster = await lock_cluster(session, name="east")
        return await apply_in_sequence(session, cluster=cluster, deltas=list(deltas))


async def held(sessions: async_sessionmaker[AsyncSession]) -> tuple[int, int | None]:
    """(the cluster's applied sequence number, the GPUs in use on its node)"""
    async with transaction(sessions) as session:
        seq = (await session.execute(select(Cluster.inventory_seq))).scalar_one()
        gpus = (await session.execute(select(NodeUse.gpu_used))).scalar_one_or_none()
    return seq, gpus


async def test_deltas_before_a_snapshot_ask_for_one(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    outcome = await send(sessions, used(1, 4))
    assert outcome == DeltasOutcome(None, Resync("no inventory yet: send a snapshot", 0))
    assert await held(sessions) == (0, None)


async def test_deltas_apply_in_order_once_and_stop_at_a_gap(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with transaction(sessions) as session:
        cluster = await lock_cluster(session, name="east")
        snapshot = InventorySnapshot.model_validate(INVENTORY)
        await replace_inventory(session, cluster=cluster, snapshot=snapshot, seq=10)

    # In order: applied together, acknowledged up to the last; the agent counts as seen.
    assert await send(sessions, used(11, 2), used(12, 3)) == DeltasOutcome(12)
    assert await held(sessions) == (12, 3)
    async with transaction(sessions) as session:
        assert (await session.execute(select(Cluster.state))).scalar_one() is ClusterState.READY

    # Resent after a reconnect: acknowledged, not applied again.
    assert await send(sessions, used(11, 7), used(12, 7)) == DeltasOutcome(12)
    assert await held(sessions) == (12, 3)

    # A duplicate, the next, then a gap: the next applies, nothing after the gap does.
    outcome = await send(sessions, used(12, 7), used(13, 5), used(15, 6), used(16, 1))
    assert outcome == DeltasOutcome(13, Resync("gap: expected seq 14, got 15", 13))
    assert await held(sessions) == (13, 5)

    # Only a gap: no acknowledgement, only the resync request.
    outcome = await send(sessions, used(15, 6))
    assert outcome == DeltasOutcome(None, Resync("gap: expected seq 14, got 15", 13))
    assert await held(sessions) == (13, 5)
