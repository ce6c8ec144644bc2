"""Kubernetes PriorityClasses (`scheduling.k8s.io/v1`): the document checked as the API server
checks it, the built-in system classes, and how a job's `priorityClassName` resolves. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from volcano_global.jobspec.fields import Checker
from volcano_global.jobspec.object_metadata import SUBDOMAIN, check_kind, named

API_VERSION = "scheduling.k8s.io/v1"
KIND = "PriorityClass"
PREEMPT_LOWER = "PreemptLowerPriority"
NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER, NEVER)
SYSTEM_PREFIX = "system-"
# Kubernetes: user classes at most HighestUserDefinablePriority; the system ones above it.
HIGHEST_USER_PRIORITY = 1_000_000_000
LOWEST_PRIORITY = -(2**31)
_FIELDS = frozenset(
    {"apiVersion", "kind", "metadata", "value", "globalDefault", "description", "preemptionPolicy"}
)


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    preemption_policy: str = PREEMPT_LOWER
    global_default: bool = False
    description: str = ""

    @property
    def built_in(self) -> bool:
        return self.name in BUILT_IN

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": self.name},
            "value": self.value,
            "preemptionPolicy": self.preemption_policy,
        }
        if self.global_default:
            doc["globalDefault"] = True
        if self.description:
            doc["description"] = self.description
        return doc


BUILT_IN = {
    "system-node-critical": PriorityClass(
        "system-node-critical",
        2_000_001_000,
        description="Used for system critical pods that must not be moved from their current node.",
    ),
    "system-cluster-critical": PriorityClass(
        "system-cluster-critical",
        2_000_000_000,
        description="Used for system critical pods "
        "that must run in the cluster, but can be moved to another node if necessary.",
    ),
}


def read_priority_class(doc: Any) -> PriorityClass:
    """Check a PriorityClass document as the API server would for a user's class; raises
    `Invalid` naming every bad field."""
    check = Checker()
    doc = check_kind(check, doc, kind=KIND, api_version=API_VERSION)
    check.unknown_fields(doc, _FIELDS, "")
    _, name = named(check, doc)
    if name is not None:
        if not (len(name) <= 253 and SUBDOMAIN.fullmatch(name)):
            check.fail("metadata.name", f"{name!r} is not a valid name (DNS subdomain)")
        elif name.startswith(SYSTEM_PREFIX):
            check.fail(
                "metadata.name",
                f"priority class names with the {SYSTEM_PREFIX!r} prefix are reserved for the "
                f"built-in classes ({', '.join(sorted(BUILT_IN))})",
            )
    value = check.integer(
        doc, "value", "", required=True, minimum=LOWEST_PRIORITY, maximum=HIGHEST_USER_PRIORITY
    )
    policy = doc.get("preemptionPolicy", PREEMPT_LOWER)
    if policy not in PREEMPTION_POLICIES:
        check.fail("preemptionPolicy", f"must be one of {', '.join(PREEMPTION_POLICIES)}")
    global_default = doc.get("globalDefault", False)
    if not isinstance(global_default, bool):
        check.fail("globalDefault", "must be true or false")
    description = doc.get("description", "")
    if not isinstance(description, str):
        check.fail("description", "must be a string")
    check.raise_if_any()
    assert name is not None and value is not None
    return PriorityClass(name, value, str(policy), bool(global_default), description)


@dataclass(frozen=True)
class ResolvedPriority:
    class_name: str | None
    value: int
    preemption_policy: str


def resolve_priority(
    name: str | None,
    classes: Mapping[str, int | PriorityClass],
    default_class: str | None = None,
) -> ResolvedPriority | None:
    """A job's priority, as Kubernetes' Priority admission gives a pod one: its named class;
    with none named, the global default class (0 and PreemptLowerPriority when there is none).
    None when the named class does not exist. `classes` may map a name to a bare value (older
    callers: PreemptLowerPriority)."""
    if name is None:
        if default_class is None or default_class not in classes:
            return ResolvedPriority(None, 0, PREEMPT_LOWER)
        name = default_class
    found = classes.get(name)
    if found is None:
        return None
    if isinstance(found, PriorityClass):
        return ResolvedPriority(name, found.value, found.preemption_policy)
    return ResolvedPriority(name, int(found), PREEMPT_LOWER)
