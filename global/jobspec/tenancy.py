"""What a queue's jobs may do in a member cluster: the namespaces they may use, the pod
security level their pods must meet, the service accounts they may run as, whether they may
bypass the scheduler (`nodeName`) or use system and restricted priority classes. Pure.

Volcano's Queue has no such fields, so they are annotations on the queue (queue documents are
admin-only, so whatever a queue carries an admin granted):

- `global.volcano.sh/namespaces`: the namespaces its jobs may use, comma-separated (default:
  the settings' `tenancy.default_namespaces`, `{queue}`: a namespace named after the queue);
  `kube-*` and the reserved namespaces (the agent's own) never, whatever an admin writes;
- `global.volcano.sh/pod-security`: `baseline` (default), `restricted` or `privileged`
  (privileged also allows `nodeName`);
- `global.volcano.sh/service-accounts`: the service accounts its pods may run as (default:
  `default`);
- `global.volcano.sh/system-priority: "true"`: may use the system priority classes and the
  classes an admin marked `global.volcano.sh/restricted: "true"`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from volcano_global.jobspec.fields import Checker, child
from volcano_global.jobspec.pod_security import (
    LEVELS,
    PRIVILEGED,
    check_pod_security,
    pod_templates,
)
from volcano_global.jobspec.priority_classes import BUILT_IN

NAMESPACES = "global.volcano.sh/namespaces"
POD_SECURITY = "global.volcano.sh/pod-security"
SERVICE_ACCOUNTS = "global.volcano.sh/service-accounts"
SYSTEM_PRIORITY = "global.volcano.sh/system-priority"
RESTRICTED_CLASS = "global.volcano.sh/restricted"  # on a PriorityClass
QUEUE_PLACEHOLDER = "{queue}"
SYSTEM_NAMESPACE_PREFIX = "kube-"
MAX_POLICIES = 10_000  # queue policies remembered per TenancyRules


@dataclass(frozen=True)
class TenancyDefaults:
    """For a queue without the annotations (from the settings' `tenancy` group)."""

    namespaces: tuple[str, ...] = (QUEUE_PLACEHOLDER,)
    reserved_namespaces: tuple[str, ...] = ("volcano-global", "volcano-global-agent")
    pod_security: str = "baseline"
    service_accounts: tuple[str, ...] = ("default",)


@dataclass(frozen=True)
class QueuePolicy:
    queue: str
    namespaces: frozenset[str]
    pod_security: str
    service_accounts: frozenset[str]
    system_priority: bool


@dataclass(frozen=True)
class TenancyRules:
    """Every queue's policy (those with annotations; the rest take the defaults) and the
    priority classes an admin restricted: what a submission is checked against."""

    annotations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # every queue's
    restricted_classes: frozenset[str] = frozenset()
    defaults: TenancyDefaults = TenancyDefaults()
    # Each queue's policy once built: the rules are read once and checked against by every
    # submission until a queue or class changes (services/tenancy/submission_rules.py).
    _policies: dict[str, QueuePolicy] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def policy(self, queue: str) -> QueuePolicy:
        found = self._policies.get(queue)
        if found is None:
            found = queue_policy(queue, self.annotations.get(queue, {}), self.defaults)
            if len(self._policies) < MAX_POLICIES:  # a name per submission: bounded
                self._policies[queue] = found
        return found


def queue_policy(
    queue: str, annotations: Mapping[str, Any], defaults: TenancyDefaults
) -> QueuePolicy:
    """A queue's policy from its annotations. An unknown pod security level (a queue stored
    before the annotations were checked) reads as restricted: fail closed."""
    namespaces = _names(annotations.get(NAMESPACES)) or defaults.namespaces
    accounts = _names(annotations.get(SERVICE_ACCOUNTS)) or defaults.service_accounts
    level = str(annotations.get(POD_SECURITY) or defaults.pod_security)
    return QueuePolicy(
        queue=queue,
        namespaces=frozenset(
            name
            for name in (n.replace(QUEUE_PLACEHOLDER, queue) for n in namespaces)
            if not is_reserved(name, defaults)
        ),
        pod_security=level if level in LEVELS else "restricted",
        service_accounts=frozenset(accounts),
        system_priority=str(annotations.get(SYSTEM_PRIORITY, "")).lower() == "true",
    )


def is_reserved(namespace: str, defaults: TenancyDefaults) -> bool:
    return namespace.startswith(SYSTEM_NAMESPACE_PREFIX) or namespace in (
        defaults.reserved_namespaces
    )


def check_queue_annotations(annotations: Mapping[str, Any], check: Checker) -> None:
    """Refuse a queue document whose tenancy annotations cannot be read (Invalid)."""
    path = "metadata.annotations"
    level = annotations.get(POD_SECURITY)
    if level is not None and level not in LEVELS:
        check.fail(child(path, POD_SECURITY), f"must be one of {', '.join(LEVELS)}")
    flag = annotations.get(SYSTEM_PRIORITY)
    if flag is not None and str(flag).lower() not in ("true", "false"):
        check.fail(child(path, SYSTEM_PRIORITY), 'must be "true" or "false"')


@dataclass(frozen=True)
class Refusal:
    """One rule a job breaks; `rule` is what the 403 names."""

    field: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (rule: {self.rule})"


def tenancy_refusals(
    document: dict[str, Any],
    *,
    namespace: str,
    priority_class: str | None,
    policy: QueuePolicy,
    rules: TenancyRules,
) -> list[Refusal]:
    """Every rule of its queue's policy the job breaks (empty: it may run)."""
    found = _namespace_refusals(namespace, policy, rules.defaults)
    templates = list(pod_templates(document))  # walked once for both checks
    found += [
        Refusal(v.field, f"pod security {policy.pod_security}", v.message)
        for v in check_pod_security(document, policy.pod_security, templates)
    ]
    for path, template in templates:
        found += _template_refusals(template, path, policy, rules)
    if priority_class is not None:
        found += _class_refusals(priority_class, _class_field(document), policy, rules)
    return found


def _namespace_refusals(
    namespace: str, policy: QueuePolicy, defaults: TenancyDefaults
) -> list[Refusal]:
    if is_reserved(namespace, defaults):
        why = "kube-* and the Global's and agents' own namespaces are reserved"
        return [Refusal("metadata.namespace", "reserved namespaces", f"{namespace!r}: {why}")]
    if namespace in policy.namespaces:
        return []
    allowed = ", ".join(sorted(policy.namespaces)) or "none"
    return [
        Refusal(
            "metadata.namespace",
            "queue namespaces",
            f"{namespace!r} is not a namespace of queue {policy.queue!r} (allowed: {allowed}; "
            f"an admin grants more with the queue annotation {NAMESPACES})",
        )
    ]


def _template_refusals(
    template: dict[str, Any], path: str, policy: QueuePolicy, rules: TenancyRules
) -> list[Refusal]:
    pod = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    assert isinstance(pod, dict)
    spec_path = child(path, "spec")
    found: list[Refusal] = []
    if pod.get("nodeName") and policy.pod_security != PRIVILEGED:
        found.append(
            Refusal(
                child(spec_path, "nodeName"),
                "scheduler bypass",
                "binding pods to a node bypasses the scheduler; allowed only for queues with "
                f"{POD_SECURITY}: privileged",
            )
        )
    for key in ("serviceAccountName", "serviceAccount"):
        account = pod.get(key)
        if account is not None and not (
            isinstance(account, str) and account in policy.service_accounts
        ):
            allowed = ", ".join(sorted(policy.service_accounts))
            found.append(
                Refusal(
                    child(spec_path, key),
                    "service accounts",
                    f"{account!r} is not a service account of queue {policy.queue!r} "
                    f"(allowed: {allowed}; an admin grants more with {SERVICE_ACCOUNTS})",
                )
            )
    pod_class = pod.get("priorityClassName")
    if isinstance(pod_class, str):
        found += _class_refusals(pod_class, child(spec_path, "priorityClassName"), policy, rules)
    return found


def _class_refusals(
    name: str, path: str, policy: QueuePolicy, rules: TenancyRules
) -> list[Refusal]:
    if policy.system_priority or not (name in BUILT_IN or name in rules.restricted_classes):
        return []
    return [
        Refusal(
            path,
            "system priority classes",
            f"priority class {name!r} is for system workloads and the classes an admin "
            f"restricted; queue {policy.queue!r} may not use it (an admin grants it with "
            f'{SYSTEM_PRIORITY}: "true")',
        )
    ]


def _class_field(document: dict[str, Any]) -> str:
    if document.get("kind") == "HyperJob":
        return "spec.replicatedJobs[*].templateSpec.priorityClassName"
    return "spec.priorityClassName"


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, str):
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())
