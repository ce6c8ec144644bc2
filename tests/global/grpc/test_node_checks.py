"""The protocol nodes' fast check (`grpc/node_checks.py`) against the schema it stands in
for: a node it clears is stored as `NodeIn` would store it, and a node it does not clear is
refused with the schema's own error, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from volcano_global.db.models import Node
from volcano_global.errors import Invalid
from volcano_global.grpc.convert import _node, _usage, delta_from, snapshot_from
from volcano_global.grpc.node_checks import checked_nodes, checked_usages
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.schemas.clusters import TAINT_KEY_LENGTH, TAINT_VALUE_LENGTH, NodeIn
from volcano_global.services.inventory.node_values import node_values

DOMAINS = [pb.Domain(name="tor-0", tier=1)]
GOOD: list[dict[str, Any]] = [
    {"name": "n0"},
    {
        "name": "n1",
        "gpu_model": "NVIDIA-H100-80GB-HBM3",  # GFD's product label: stored canonical
        "gpu_allocatable": 8,
        "gpu_used": 8,
        "cpu_allocatable_millis": 2**30,
        "cpu_used_millis": 5,
        "memory_allocatable_bytes": 2**46,
        "memory_used_bytes": 7,
        "ready": False,
        "schedulable": True,
        "domain": "tor-0",
        "labels": {"zone": "a", "empty": ""},
        "taints": [{"key": "gpu", "value": "", "effect": "NoSchedule"}],
    },
    {"name": "x" * 253, "gpu_model": "  h100 ", "taints": [{"key": "k", "effect": "E"}]},
]
BAD = {  # field -> a node the schema refuses for it
    "name": {"name": ""},
    "gpu_model": {"name": "n", "gpu_model": "m" * 129},
    "gpu_allocatable": {"name": "n", "gpu_allocatable": 1025},
    "cpu_used_millis": {"name": "n", "cpu_used_millis": 2**30 + 1},
    "memory_allocatable_bytes": {"name": "n", "memory_allocatable_bytes": 2**46 + 1},
    "gpuUsed": {"name": "n", "gpu_allocatable": 2, "gpu_used": 3},
    "labels": {"name": "n", "labels": {"a": "b\x00"}},
    "taints": {"name": "n", "taints": [{"key": "k" * 318, "effect": "E"}]},
    "domain": {"name": "n", "domain": "nowhere"},
}


def test_a_node_cleared_is_stored_as_the_schema_stores_it() -> None:
    nodes = [pb.Node(**n) for n in GOOD]
    fast = checked_nodes(nodes)
    assert fast is not None
    assert fast == [node_values(NodeIn.model_validate(_node(n))) for n in nodes]
    assert fast[1].gpu_model == "H100" and fast[2].gpu_model == "h100"  # trimmed
    snapshot = snapshot_from(pb.InventorySnapshot(domains=DOMAINS, nodes=nodes))
    assert snapshot.nodes == fast and [d.name for d in snapshot.domains] == ["tor-0"]


@pytest.mark.parametrize("field", sorted(BAD))
def test_a_node_not_cleared_gets_the_schemas_error(field: str) -> None:
    node = pb.Node(**BAD[field])
    if field != "domain":  # (the domain is checked against the message's domains)
        assert checked_nodes([node]) is None
    with pytest.raises(Invalid) as refused:
        snapshot_from(pb.InventorySnapshot(domains=DOMAINS, nodes=[pb.Node(name="ok"), node]))
    assert field in str(refused.value.errors) and "nodes[1]" in str(refused.value.errors)


NODES = Node.__table__.columns
LONGEST = {  # field -> its bound where the stored value's bound is defined
    "name": NODES["name"].type.length,
    "gpu_model": NODES["gpu_model"].type.length,
    "taint key": TAINT_KEY_LENGTH,  # (taints are stored as JSON: the schema bounds them)
    "taint value": TAINT_VALUE_LENGTH,
}


def _with(field: str, length: int) -> pb.Node:
    text = "m" * length
    if field == "taint key":
        return pb.Node(name="n", taints=[pb.Taint(key=text, effect="E")])
    if field == "taint value":
        return pb.Node(name="n", taints=[pb.Taint(key="k", value=text, effect="E")])
    return pb.Node(**{"name": "n", field: text})


@pytest.mark.parametrize("field", sorted(LONGEST))
def test_the_fast_checks_bounds_are_the_columns_and_the_schemas(field: str) -> None:
    """At its bound a string is cleared and stored as the schema stores it; one character
    more and the fast check leaves it to the schema, which refuses it."""
    longest = _with(field, LONGEST[field])
    assert checked_nodes([longest]) == [node_values(NodeIn.model_validate(_node(longest)))]
    beyond = _with(field, LONGEST[field] + 1)
    assert checked_nodes([beyond]) is None
    with pytest.raises(Invalid, match="at most"):
        snapshot_from(pb.InventorySnapshot(nodes=[beyond]))


def test_duplicates_and_removed_upserts_get_the_schemas_error() -> None:
    twice = [pb.Node(name="n"), pb.Node(name="n")]
    assert checked_nodes(twice) is None
    with pytest.raises(Invalid, match="duplicate node"):
        snapshot_from(pb.InventorySnapshot(nodes=twice))
    with pytest.raises(Invalid, match="both changed and removed"):
        delta_from(pb.InventoryDelta(node_upserts=[pb.Node(name="n")], node_removals=["n"]))
    delta = delta_from(pb.InventoryDelta(node_upserts=[pb.Node(name="n")], node_removals=["m"]))
    assert [n.name for n in delta.node_upserts] == ["n"] and delta.node_removals == ["m"]


def test_more_nodes_than_a_message_may_carry_get_the_schemas_error() -> None:
    many = [pb.Node(name=f"n{i}") for i in range(20_001)]
    assert checked_nodes(many) is None
    with pytest.raises(Invalid, match="at most 20000 items"):
        snapshot_from(pb.InventorySnapshot(nodes=many))
    with pytest.raises(Invalid, match="at most 20000 items"):
        delta_from(pb.InventoryDelta(node_upserts=many))


def test_a_sequence_number_beyond_64_signed_bits_is_refused_naming_the_field() -> None:
    with pytest.raises(Invalid, match=r"snapshot\.seq"):
        snapshot_from(pb.InventorySnapshot(seq=2**63))
    with pytest.raises(Invalid, match=r"delta\.seq"):
        delta_from(pb.InventoryDelta(seq=2**63))
    assert snapshot_from(pb.InventorySnapshot(seq=2**63 - 1)).nodes == []


USAGE_BAD = {  # field -> a usage the schema refuses for it
    "name": {"name": ""},
    "gpu_used": {"name": "n", "gpu_used": 1025},
    "cpu_used_millis": {"name": "n", "cpu_used_millis": 2**30 + 1},
    "memory_used_bytes": {"name": "n", "memory_used_bytes": 2**46 + 1},
}


def test_a_usage_cleared_is_taken_as_the_schema_takes_it() -> None:
    usages = [
        pb.NodeUsage(name="a"),
        pb.NodeUsage(name="b", gpu_used=8, cpu_used_millis=2**30, memory_used_bytes=2**46),
    ]
    fast = checked_usages(usages)
    assert fast == [tuple(_usage(u).values()) for u in usages]
    delta = delta_from(pb.InventoryDelta(node_usages=usages, node_upserts=[pb.Node(name="c")]))
    assert delta.node_usages == fast and [n.name for n in delta.node_upserts] == ["c"]


@pytest.mark.parametrize("field", sorted(USAGE_BAD))
def test_a_usage_not_cleared_gets_the_schemas_error(field: str) -> None:
    usage = pb.NodeUsage(**USAGE_BAD[field])
    assert checked_usages([usage]) is None
    with pytest.raises(Invalid) as refused:
        delta_from(pb.InventoryDelta(node_usages=[pb.NodeUsage(name="ok"), usage]))
    assert f"delta.node_usages[1].{field}" in str(refused.value.errors)


@pytest.mark.parametrize(
    "delta",
    [
        pb.InventoryDelta(node_usages=[pb.NodeUsage(name="n"), pb.NodeUsage(name="n")]),
        pb.InventoryDelta(node_usages=[pb.NodeUsage(name="n")], node_upserts=[pb.Node(name="n")]),
        pb.InventoryDelta(node_usages=[pb.NodeUsage(name="n")], node_removals=["n"]),
    ],
    ids=["twice", "upserted", "removed"],
)
def test_a_usage_of_a_node_named_elsewhere_in_the_delta_is_refused(
    delta: pb.InventoryDelta,
) -> None:
    with pytest.raises(Invalid, match=r"nodeUsages\[\d\]\.name: node 'n' is named twice"):
        delta_from(delta)
