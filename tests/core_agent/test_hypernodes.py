"""HyperNodes read from the API (the real client against the emulator) resolve to the members
Volcano's scheduler would give them, and a HyperNode Volcano cannot use does not stop the agent."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from core_agent.kubernetes.hypernodes import Unresolvable, label_selector, node_members, regex
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.kube_objects import hypernode, node
from tests.factories import eventually
from tests.k8s_emulator.server import EVENTS, HYPERNODES, KubeEmulator
from tests.k8s_emulator.server import NODES as NODE_GVR


def member(kind: str = "Node", **selector: Any) -> dict[str, Any]:
    return {"type": kind, "selector": selector}


def by_regex(pattern: str, kind: str = "Node") -> dict[str, Any]:
    return member(kind, regexMatch={"pattern": pattern})


def labels(kind: str = "Node", **selector: Any) -> dict[str, Any]:
    return member(kind, labelMatch=selector)


def fleet(emulator: KubeEmulator, hypernodes: list[dict[str, Any]]) -> None:
    emulator.register(HYPERNODES, "HyperNode", namespaced=False)
    for name, extra in (
        ("node-gpu-a-1", {"rack": "a", "pool": "train"}),
        ("node-gpu-a-2", {"rack": "a", "pool": "serve"}),
        ("node-gpu-b-1", {"rack": "b", "pool": "train", "drain": "yes"}),
        ("node-gpu-b-12", {"rack": "b"}),
        ("node-gpu-c-1", {"rack": "c"}),
    ):
        emulator.create(NODE_GVR, node(name, **extra))
    for obj in hypernodes:
        emulator.create(HYPERNODES, obj)


async def domains_of(emulator: KubeEmulator, api: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(node -> its domain, HyperNode -> its parent) as the agent reports them."""
    source = KubernetesSource(api, watch_timeout_s=5)
    await source.start()
    try:
        inventory = source.current()
    finally:
        await source.stop()
    return (
        {n: v.domain for n, v in inventory.nodes.items() if v.domain},
        {d: v.parent for d, v in inventory.domains.items() if v.parent},
    )


async def test_regex_match_searches_with_re2(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    fleet(
        emulator,
        [
            hypernode("rack-a", 1, [by_regex("gpu-a")]),  # Go's MatchString: anywhere in the name
            hypernode(
                "rack-b-1", 1, [by_regex(r"b-1\z")]
            ),  # RE2's end of text; Python re refuses it
            hypernode("letters", 2, [by_regex(r"^\pL+-gpu-c")]),  # a Unicode class, RE2 only
        ],
    )
    node_domain, _ = await domains_of(emulator, api)
    assert node_domain == {
        "node-gpu-a-1": "rack-a",
        "node-gpu-a-2": "rack-a",
        "node-gpu-b-1": "rack-b-1",  # not node-gpu-b-12: \z is the end of the name
        "node-gpu-c-1": "letters",
    }


async def test_label_match_is_a_full_label_selector(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    fleet(
        emulator,
        [
            hypernode(
                "train-a",
                1,
                [
                    labels(
                        matchLabels={"pool": "train"},
                        matchExpressions=[{"key": "rack", "operator": "In", "values": ["a"]}],
                    )
                ],
            ),
            hypernode(
                "b-undrained",
                1,
                [
                    labels(
                        matchExpressions=[
                            {"key": "rack", "operator": "NotIn", "values": ["a", "c"]},
                            {"key": "drain", "operator": "DoesNotExist"},
                        ]
                    )
                ],
            ),
            hypernode(
                "pooled",
                2,
                [labels(matchExpressions=[{"key": "pool", "operator": "Exists"}])],
            ),
            hypernode("nothing", 1, [labels()]),  # empty: selects no node (not every node)
            hypernode("nothing-either", 1, [labels(matchLabels={}, matchExpressions=[])]),
        ],
    )
    node_domain, _ = await domains_of(emulator, api)
    assert node_domain == {
        "node-gpu-a-1": "train-a",
        "node-gpu-a-2": "pooled",  # pool=serve: only the Exists selector takes it
        "node-gpu-b-1": "pooled",  # drained
        "node-gpu-b-12": "b-undrained",
    }


async def test_hypernode_members_by_exact_match_only(kube, caplog) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    fleet(
        emulator,
        [
            hypernode("tor0", 1, [by_regex("gpu-a")]),
            hypernode("tor1", 1, [by_regex("gpu-b")]),
            hypernode("spine", 2, [member("HyperNode", exactMatch={"name": "tor0"})]),
            # One parent per HyperNode (Volcano refuses a second); the first by name keeps it.
            hypernode("spine-b", 2, [member("HyperNode", exactMatch={"name": "tor0"})]),
            # Volcano resolves a HyperNode member by exactMatch alone: these select no child.
            hypernode("by-regex", 3, [by_regex("tor.*", kind="HyperNode")]),
            hypernode("by-label", 3, [labels(kind="HyperNode", matchLabels={"rack": "b"})]),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="core_agent.kubernetes.hypernodes"):
        _, parents = await domains_of(emulator, api)
    assert parents == {"tor0": "spine"}
    warnings = [r.message for r in caplog.records]
    assert any("HyperNode by-regex members[0]" in w and "exactMatch only" in w for w in warnings)
    assert any("HyperNode by-label members[0]" in w and "exactMatch only" in w for w in warnings)
    assert any(w.startswith("HyperNode spine-b members[0]: tor0 already belongs") for w in warnings)


async def test_a_bad_pattern_is_a_warning_and_the_agent_goes_on(kube, caplog) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    fleet(
        emulator,
        [
            hypernode("good", 1, [by_regex("gpu-a")]),
            # Go refuses a backreference too; Python's re would have accepted it.
            hypernode("backref", 1, [by_regex(r"(gpu)-\1"), by_regex("gpu-b-12")]),
            hypernode("unclosed", 1, [by_regex("gpu-[ab")]),
            hypernode(
                "bad-operator",
                1,
                [labels(matchExpressions=[{"key": "rack", "operator": "Gt", "values": ["1"]}])],
            ),
        ],
    )
    source = KubernetesSource(api, watch_timeout_s=5)
    with caplog.at_level(logging.WARNING, logger="core_agent.kubernetes.hypernodes"):
        await source.start()
        try:
            for _ in range(3):  # resolved on every change: each problem is reported once
                inventory = source.current()
            warnings = [r.message for r in caplog.records]
            assert len(warnings) == 3, warnings
            assert any(w.startswith("HyperNode backref members[0]:") for w in warnings)
            assert any("HyperNode unclosed members[0]" in w for w in warnings)
            assert any("'Gt' is not a valid label selector operator" in w for w in warnings)
            # Each is an Event on its HyperNode too, as `kubectl describe` shows it.
            await eventually(lambda: len(emulator.objects[EVENTS]) == 3)
            events = {e["involvedObject"]["name"]: e for e in emulator.objects[EVENTS].values()}
            assert sorted(events) == ["backref", "bad-operator", "unclosed"]
            assert events["unclosed"]["reason"] == "MemberUnresolvable"
            assert events["unclosed"]["type"] == "Warning"
            assert events["unclosed"]["involvedObject"]["kind"] == "HyperNode"
            assert events["unclosed"]["message"].startswith("HyperNode unclosed members[0]")
            # The member that compiles still counts; the others select nothing.
            assert inventory.nodes["node-gpu-b-12"].domain == "backref"
            assert inventory.nodes["node-gpu-a-1"].domain == "good"
            assert inventory.nodes["node-gpu-b-1"].domain == ""
            # The watches go on: the HyperNode, fixed, takes its nodes.
            fixed = hypernode("unclosed", 1, [by_regex("gpu-b-1$")])
            emulator.patch(HYPERNODES, "unclosed", {"spec": fixed["spec"]})
            await eventually(lambda: source.current().nodes["node-gpu-b-1"].domain == "unclosed")
            # A node that joins later is searched too (what a pattern selects is kept only
            # while the node names stay the same).
            emulator.create(NODE_GVR, node("node-gpu-a-9"))
            await eventually(
                lambda: getattr(source.current().nodes.get("node-gpu-a-9"), "domain", "") == "good"
            )
        finally:
            await source.stop()


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        ({"matchExpressions": [{"key": "rack", "operator": "In"}]}, "at least one value"),
        (
            {"matchExpressions": [{"key": "rack", "operator": "Exists", "values": ["a"]}]},
            "takes no values",
        ),
        ({"matchLabels": {"bad key!": "a"}}, "not a valid label key"),
        ({"matchLabels": {"/rack": "a"}}, "not a valid label key"),
        ({"matchLabels": {"rack": "a b"}}, "not a valid label value"),
    ],
)
def test_selectors_volcano_cannot_convert_are_refused(selector: dict, why: str) -> None:
    with pytest.raises(Unresolvable, match=why):
        label_selector(selector)


def test_prefixed_keys_and_union_of_selectors() -> None:
    nodes = {"a": {"topology.kubernetes.io/zone": "z1"}, "b": {}}
    zone = {"matchLabels": {"topology.kubernetes.io/zone": "z1"}}
    assert node_members({"labelMatch": zone}, nodes) == {"a"}
    assert node_members({"exactMatch": {"name": "b"}, "labelMatch": zone}, nodes) == {"a", "b"}
    assert node_members({"exactMatch": {"name": "gone"}}, nodes) == set()


@pytest.mark.parametrize(
    ("pattern", "compiles"),
    [
        (r"gpu\C", False),  # any byte: RE2 has it, Go's regexp refuses it
        (r"[\C]", False),
        (r"\Qa\Cb\E", True),  # quoted: a literal backslash and C
        (r"\\C", True),  # an escaped backslash, then C
        (r"(?P<rack>[a-z]+)-\d+", True),
        ("a{1001}", False),  # Go's repeat limit is 1000 as RE2's
    ],
)
def test_go_syntax(pattern: str, compiles: bool) -> None:
    if compiles:
        regex(pattern)
    else:
        with pytest.raises(Unresolvable, match="does not compile"):
            regex(pattern)
