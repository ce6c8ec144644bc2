"""A simulated cluster stages a share's data for bytes * 8 / (Gbps * 1e9) simulated seconds
(its slowest copy's) before binding its pods, reported Staging meanwhile; a share cancelled
while staging never starts."""

from __future__ import annotations

import asyncio

import pytest

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.factories import REPLY_S, share_assignment
from volcano_global.rpc.shares import (
    ShareCancellation,
    SharePhase,
    ShareStatus,
    StagingItem,
)

SCALE = 0.01  # wall seconds per simulated second
# 25 GB at 10 Gbps: 20 s; 1 GB at 100 Gbps: 0.08 s, side by side: 20 simulated s, 0.2 s wall.
ITEMS = (
    StagingItem(data_source="corpus", bytes=25 * 10**9, destination="/data/c", gbps=10.0),
    StagingItem(data_source="tokenizer", bytes=10**9, destination="/data/t", gbps=100.0),
)
ASSIGNMENT = share_assignment(
    gpus_per_pod=8, domains={"east-tor0000": 2}, duration_seconds=3600, staging=ITEMS
)


def _cluster() -> SimulatedCluster:
    spec = ClusterSpec.model_validate(
        {"nodeGroups": [{"count": 4}], "topology": {"tiers": [{"name": "tor", "size": 4}]}}
    )
    cluster = SimulatedCluster.from_spec("east", spec)
    cluster.time_scale = SCALE
    return cluster


def _used(cluster: SimulatedCluster) -> int:
    return sum(n.used_gpus for n in cluster.nodes.values())


async def test_a_share_stages_for_its_bytes_over_the_reserved_bandwidth() -> None:
    cluster = _cluster()
    reports: list[ShareStatus] = []
    running = asyncio.Event()

    def report(status: ShareStatus) -> None:
        reports.append(status)
        if status.phase is SharePhase.RUNNING:
            running.set()

    loop = asyncio.get_running_loop()
    began = loop.time()
    cluster.apply_share(ASSIGNMENT, report)
    assert ASSIGNMENT.staging_seconds == pytest.approx(20.0)
    [staging] = reports
    assert (staging.phase, staging.staging_bytes) == (SharePhase.STAGING, 26 * 10**9)
    assert _used(cluster) == 0  # no pod bound while the data is copied
    assert [h.phase for h in cluster.held_shares()] == [SharePhase.STAGING]
    cluster.apply_share(ASSIGNMENT, report)  # given again: answered, not staged twice
    assert [r.phase for r in reports] == [SharePhase.STAGING] * 2

    await asyncio.wait_for(running.wait(), timeout=REPLY_S)
    took = loop.time() - began
    assert 20 * SCALE <= took < 20 * SCALE + 0.5
    assert [r.phase for r in reports[2:]] == [SharePhase.ACCEPTED, SharePhase.RUNNING]
    assert _used(cluster) == 16


async def test_a_share_cancelled_while_staging_never_starts() -> None:
    cluster = _cluster()
    cluster.time_scale = 1.0  # 20 s of staging: cancelled long before
    reports: list[ShareStatus] = []
    cluster.apply_share(ASSIGNMENT, reports.append)
    copy_ends = cluster.shares[ASSIGNMENT.placement_id].timer
    assert copy_ends is not None
    cancellation = ShareCancellation(placement_id=ASSIGNMENT.placement_id, job_uid="u")
    cluster.cancel_share(cancellation, reports.append)
    assert [r.phase for r in reports] == [SharePhase.STAGING, SharePhase.CANCELLED]
    assert copy_ends.cancelled()  # its pods will not be bound when the copy would have ended
    assert cluster.held_shares() == []
    assert _used(cluster) == 0
