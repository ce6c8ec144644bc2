"""A queue's tenancy policy from its annotations, and the rules a job breaks against it."""

from __future__ import annotations

from typing import Any

from tests.factories import job_document
from volcano_global.jobspec.fields import Checker
from volcano_global.jobspec.tenancy import (
    NAMESPACES,
    POD_SECURITY,
    SERVICE_ACCOUNTS,
    SYSTEM_PRIORITY,
    TenancyDefaults,
    TenancyRules,
    check_queue_annotations,
    queue_policy,
    tenancy_refusals,
)

DEFAULTS = TenancyDefaults()


def refusals(
    document: dict[str, Any],
    annotations: dict[str, str] | None = None,
    *,
    priority_class: str | None = None,
    restricted: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    rules = TenancyRules({"team-a": annotations or {}}, restricted, DEFAULTS)
    found = tenancy_refusals(
        document,
        namespace=document["metadata"]["namespace"],
        priority_class=priority_class,
        policy=rules.policy("team-a"),
        rules=rules,
    )
    return [(r.field, r.rule) for r in found]


def in_namespace(namespace: str) -> dict[str, Any]:
    document = job_document("train", queue="team-a")
    document["metadata"]["namespace"] = namespace
    return document


def test_a_queue_without_annotations_uses_its_own_namespace_at_baseline() -> None:
    policy = queue_policy("team-a", {}, DEFAULTS)
    assert policy.namespaces == {"team-a"}
    assert (policy.pod_security, policy.service_accounts) == ("baseline", {"default"})
    assert not policy.system_priority
    assert refusals(in_namespace("team-a")) == []
    assert refusals(in_namespace("team-b")) == [("metadata.namespace", "queue namespaces")]


def test_reserved_namespaces_are_refused_whatever_the_queue_says() -> None:
    granted = {NAMESPACES: "kube-system,volcano-global-agent,{queue},infra"}
    assert queue_policy("team-a", granted, DEFAULTS).namespaces == {"team-a", "infra"}
    for namespace in ("kube-system", "kube-public", "volcano-global-agent", "volcano-global"):
        assert refusals(in_namespace(namespace), granted) == [
            ("metadata.namespace", "reserved namespaces")
        ]
    assert refusals(in_namespace("infra"), granted) == []


def test_service_accounts_node_name_and_classes_need_a_grant() -> None:
    document = in_namespace("team-a")
    pod = document["spec"]["tasks"][0]["template"]["spec"]
    pod.update(serviceAccountName="builder", nodeName="n1", priorityClassName="urgent")
    assert refusals(
        document, priority_class="system-node-critical", restricted=frozenset({"urgent"})
    ) == [
        ("spec.tasks[0].template.spec.nodeName", "scheduler bypass"),
        ("spec.tasks[0].template.spec.serviceAccountName", "service accounts"),
        ("spec.tasks[0].template.spec.priorityClassName", "system priority classes"),
        ("spec.priorityClassName", "system priority classes"),
    ]
    granted = {
        SERVICE_ACCOUNTS: "default,builder",
        POD_SECURITY: "privileged",
        SYSTEM_PRIORITY: "true",
    }
    assert (
        refusals(
            document,
            granted,
            priority_class="system-node-critical",
            restricted=frozenset({"urgent"}),
        )
        == []
    )


def test_an_unreadable_level_reads_as_restricted_and_is_refused_in_a_queue_document() -> None:
    assert queue_policy("q", {POD_SECURITY: "root"}, DEFAULTS).pod_security == "restricted"
    check = Checker()
    check_queue_annotations({POD_SECURITY: "root", SYSTEM_PRIORITY: "yes"}, check)
    assert [e.field for e in check.errors] == [
        f'metadata.annotations["{POD_SECURITY}"]',
        f'metadata.annotations["{SYSTEM_PRIORITY}"]',
    ]


def test_a_service_account_of_the_wrong_type_is_refused() -> None:
    document = in_namespace("team-a")
    document["spec"]["tasks"][0]["template"]["spec"]["serviceAccountName"] = ["default"]
    assert refusals(document) == [
        ("spec.tasks[0].template.spec.serviceAccountName", "service accounts")
    ]
