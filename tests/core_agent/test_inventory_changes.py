"""A simulated cluster's deltas built from the names it touched equal the deltas from comparing
the whole inventory, through updates, binds, releases, additions and removals."""

from __future__ import annotations

import random

import pytest

from core_agent.inventory import Changes, delta_of_changes
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


@pytest.mark.parametrize("usages", [False, True], ids=["whole nodes", "usages"])
async def test_deltas_from_touched_names_equal_full_comparisons(usages: bool) -> None:
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
        expected = sent.delta_to(whole, step, usages=usages)
        changes = cluster.take_changes()
        assert delta_of_changes(sent, cluster, changes, step, usages=usages) == expected
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


def test_a_node_whose_usage_alone_changed_goes_as_its_usage() -> None:
    cluster = _cluster()
    cluster.take_changes()
    sent = cluster.current()
    a, b, c = sorted(cluster.nodes)[:3]
    cluster.update_node(a, used_gpus=3, used_cpu_millis=500, used_memory_bytes=7)
    cluster.update_node(b, used_gpus=2, ready=False)  # more than its usage: whole
    cluster.update_node(c, schedulable=False)
    whole = cluster.current()
    delta = sent.delta_to(whole, 1, usages=True)
    assert delta is not None
    assert [
        (u.name, u.gpu_used, u.cpu_used_millis, u.memory_used_bytes) for u in delta.node_usages
    ] == [(a, 3, 500, 7)]
    assert [n.name for n in delta.node_upserts] == [b, c]
    older_global = sent.delta_to(whole, 1)  # a Global that does not take usages
    assert older_global is not None and not older_global.node_usages
    assert [n.name for n in older_global.node_upserts] == [a, b, c]
