"""A simulated cluster's deltas built from the names it touched equal the deltas from comparing
the whole inventory, through updates, binds, releases, additions and removals."""

from __future__ import annotations

import random

from core_agent.inventory import Changes
from core_agent.simulated.cluster import ClusterSpec, SimNode, SimulatedCluster
from tests.factories import share_assignment
from volcano_global.rpc.shares import ShareCancellation, ShareStatus


def _cluster() -> SimulatedCluster:
    spec = ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": 64, "gpusPerNode": 8}],
            "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 4}]},
        }
    )
    return SimulatedCluster.from_spec("east", spec)


async def test_deltas_from_touched_names_equal_full_comparisons() -> None:
    cluster = _cluster()
    rng = random.Random(7)
    cluster.take_changes()
    sent = cluster.current()  # what the agent last sent, kept up to date by patches
    reports: list[ShareStatus] = []
    live: list[str] = []  # placements bound
    for step in range(200):
        names = sorted(cluster.nodes)
        action = rng.randrange(6)
        if action == 0:
            cluster.update_node(
                rng.choice(names), used_gpus=rng.randrange(9), ready=rng.random() > 0.2
            )
        elif action == 1:
            cluster.update_node(rng.choice(names), schedulable=False)
            cluster.update_node(rng.choice(names), used_gpus=0)  # maybe no change at all
        elif action == 2:
            cluster.add_node(SimNode(f"extra-{step}", "H100", 8, 1000, 1 << 30, "east-tor0000"))
        elif action == 3 and len(names) > 10:
            cluster.remove_node(rng.choice(names))
        elif action == 4 or not live:
            assignment = share_assignment(
                placement_id=f"p{step}",
                gpus_per_pod=2,
                domains={"east-tor0001": 2},
                duration_seconds=3600,
            )
            cluster.apply_share(assignment, reports.append)
            live.append(f"p{step}")
        else:  # cancel a share bound in an earlier step
            placement = live.pop(rng.randrange(len(live)))
            cluster.cancel_share(ShareCancellation(placement_id=placement), reports.append)
        whole = cluster.current()
        expected = sent.delta_to(whole, step)
        changes = cluster.take_changes()
        part = cluster.view_of(changes)
        assert sent.delta_to(part, step, within=changes) == expected
        sent.patch(part, changes)
        assert sent == whole
    phases = {r.phase for r in reports}
    assert {"Running", "Cancelled"} <= phases  # binds and releases happened


def test_nothing_touched_means_no_delta() -> None:
    cluster = _cluster()
    cluster.take_changes()
    sent = cluster.current()
    changes = cluster.take_changes()
    assert changes == Changes()
    assert sent.delta_to(cluster.view_of(changes), 1, within=changes) is None
