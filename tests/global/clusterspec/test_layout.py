"""A simulated cluster's spec lays out its nodes and HyperNode tiers the same for the agent's
simulated cluster and for the what-if simulator (which no longer imports the agent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core_agent.simulated.cluster import SimulatedCluster
from volcano_global.clusterspec import layout
from volcano_global.clusterspec.spec import ClusterSpec
from volcano_global.simulation.nodes import Fleet
from volcano_global.simulation.scenario import Scenario

SIMULATE = Path(__file__).parents[3] / "docs" / "examples" / "simulate"


def test_tiers_group_nodes_then_domains_in_order() -> None:
    spec = ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": 5, "gpusPerNode": 4, "gpuModel": "nvidia-h100-80gb-hbm3"}],
            "topology": {"tiers": [{"name": "tor", "size": 2}, {"name": "spine", "size": 2}]},
        }
    )
    shape = layout.from_spec("east", spec)
    assert [(n.name, n.domain) for n in shape.nodes] == [
        ("east-g0-00000", "east-tor0000"),
        ("east-g0-00001", "east-tor0000"),
        ("east-g0-00002", "east-tor0001"),
        ("east-g0-00003", "east-tor0001"),
        ("east-g0-00004", "east-tor0002"),
    ]
    assert {n.gpu_model for n in shape.nodes} == {"H100"}  # the GFD name, canonical
    assert [(d.name, d.tier, d.parent) for d in shape.domains] == [
        ("east-tor0000", 1, "east-spine0000"),
        ("east-tor0001", 1, "east-spine0000"),
        ("east-tor0002", 1, "east-spine0001"),
        ("east-spine0000", 2, None),
        ("east-spine0001", 2, None),
    ]


@pytest.mark.parametrize("name", ["gang-two-regions.yaml", "gang-lingjun.yaml"])
def test_the_simulator_sees_the_agents_simulated_clusters(name: str) -> None:
    scenario = Scenario.load(SIMULATE / name)
    fleet = Fleet(scenario)
    for entry in scenario.clusters:
        if entry.spec is not None:
            agent = SimulatedCluster.from_spec(entry.name, entry.spec)
        else:
            block = entry.lingjun_block or 0
            agent = SimulatedCluster.from_lingjun(
                entry.name, block=block, gpu_model=entry.gpu_model
            )
        gpus: dict[tuple[str, str], int] = {}
        for node in agent.nodes.values():
            if node.gpus:
                key = (node.domain or entry.name, node.gpu_model)
                gpus[key] = gpus.get(key, 0) + node.gpus
        seen = {
            (leaf, model): sum(n.gpus for n in nodes)
            for (cluster, leaf, model), nodes in fleet.nodes.items()
            if cluster == entry.name
        }
        assert seen == gpus
        assert fleet.cluster_gpus[entry.name] == sum(gpus.values()) > 0
