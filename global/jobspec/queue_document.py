"""The Volcano Queue document (`scheduling.volcano.sh/v1beta1`, kind `Queue`), read and checked
the way Volcano's CRD schema and admission webhook check it; pure, so the REST API, the CLI and a
Kubernetes-compatible front end share it.

What the Global uses of a queue: `weight`; `capability`, `deserved` and `guarantee.resource`
(every accelerator resource of `jobspec.accelerators` counts as GPUs, summed; cpu and memory are
checked and kept); `reclaimable`; `parent` (or the `volcano.sh/hierarchy` annotations); `priority`;
and the state (`status.state`, Open or Closed, as `vcctl queue operate` leaves it). Every other
field the CRD defines (`type`, `dequeueStrategy`, `extendClusters`, `affinity`) is checked for
shape, stored and returned unchanged."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from volcano_global.jobspec.accelerators import is_accelerator
from volcano_global.jobspec.fields import INT32_MAX, Checker, child
from volcano_global.jobspec.object_metadata import SUBDOMAIN, check_kind, named, string_map
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.jobspec.tenancy import check_queue_annotations
from volcano_global.jobspec.time_sharing import check_time_sharing

API_VERSION = "scheduling.volcano.sh/v1beta1"
KIND = "Queue"
ROOT = "root"  # Volcano's implicit top of the hierarchy
HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
STATES = ("Open", "Closed")
MAX_WEIGHT = 65535  # the CRD's maximum
SPEC_FIELDS = frozenset(
    {
        "weight",
        "capability",
        "deserved",
        "guarantee",
        "reclaimable",
        "parent",
        "priority",
        "type",
        "dequeueStrategy",
        "extendClusters",
        "affinity",
    }
)
_AFFINITY_KINDS = ("nodeGroupAffinity", "nodeGroupAntiAffinity")
_AFFINITY_TERMS = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


@dataclass(frozen=True)
class QueueDefinition:
    """A checked Volcano Queue: what the Global reads of it, and the document's own parts kept
    as written (`spec`, `labels`, `annotations`) so that it round-trips unchanged."""

    name: str
    spec: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    state: str = "Open"
    weight: int = 1
    parent: str | None = None  # None: a child of the root
    priority: int = 0
    reclaimable: bool = True
    capability_gpus: int | None = None  # None: no cap
    deserved_gpus: int | None = None
    guarantee_gpus: int = 0
    hierarchy: tuple[tuple[str, float], ...] = ()  # the annotations' path, with weights


def read_queue(doc: Any) -> QueueDefinition:
    """Check a Queue document; raises `Invalid` naming every bad field."""
    check = Checker()
    doc = check_kind(check, doc, kind=KIND, api_version=API_VERSION)
    metadata, name = named(check, doc)
    if name is not None and not (len(name) <= 63 and SUBDOMAIN.fullmatch(name)):
        check.fail("metadata.name", f"{name!r} is not a valid queue name (DNS subdomain, <= 63)")
    if name == ROOT:
        check.fail("metadata.name", "'root' is Volcano's implicit top of the hierarchy")
    labels = string_map(check, metadata, "labels", "metadata")
    annotations = string_map(check, metadata, "annotations", "metadata")
    check_queue_annotations(annotations, check)
    check_time_sharing(annotations, check)
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        check.fail("spec", "must be a mapping")
        spec = {}
    check.unknown_fields(spec, SPEC_FIELDS, "spec")
    weight = check.integer(spec, "weight", "spec", minimum=1, maximum=MAX_WEIGHT)
    priority = check.integer(spec, "priority", "spec", minimum=0)
    reclaimable = spec.get("reclaimable", True)
    if not isinstance(reclaimable, bool):
        check.fail("spec.reclaimable", "must be true or false")
    parent = check.string(spec, "parent", "spec")
    if parent is not None and not (len(parent) <= 253 and SUBDOMAIN.fullmatch(parent)):
        check.fail("spec.parent", f"{parent!r} is not a valid queue name")
    if parent is not None and parent == name:
        check.fail("spec.parent", f"queue {name} cannot use itself as parent")
    capability = _resources(check, spec, "capability", "spec")
    deserved = _resources(check, spec, "deserved", "spec")
    guarantee_obj = check.mapping(spec, "guarantee", "spec") or {}
    check.unknown_fields(guarantee_obj, frozenset({"resource"}), "spec.guarantee")
    guarantee = _resources(check, guarantee_obj, "resource", "spec.guarantee")
    _compare(check, capability, deserved, guarantee)
    for key in ("type", "dequeueStrategy"):
        check.string(spec, key, "spec")
    if spec.get("dequeueStrategy") not in (None, "fifo", "traverse"):
        check.fail("spec.dequeueStrategy", "must be fifo or traverse")
    _extend_clusters(check, spec)
    _affinity(check, spec)
    state = _state(check, doc)
    hierarchy = _hierarchy(check, annotations, name)
    check.raise_if_any()
    assert name is not None
    if parent is None and len(hierarchy) > 2:
        parent = hierarchy[-2][0]  # the annotations' parent, as Volcano's hierarchy reads it
    return QueueDefinition(
        name=name,
        spec=copy.deepcopy(spec),
        labels=labels,
        annotations=annotations,
        state=state,
        weight=weight if weight is not None else _annotated_weight(hierarchy),
        parent=None if parent in (None, ROOT) else parent,
        priority=priority or 0,
        reclaimable=bool(reclaimable),
        capability_gpus=_gpus(capability),
        deserved_gpus=_gpus(deserved),
        guarantee_gpus=_gpus(guarantee) or 0,
        hierarchy=hierarchy,
    )


def queue_document(
    *,
    name: str,
    spec: dict[str, Any],
    labels: dict[str, str],
    annotations: dict[str, str],
    state: str,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A stored queue as its Volcano document (what `read_queue` read, unchanged)."""
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": copy.deepcopy(spec),
        "status": {"state": state, **(status or {})},
    }


def gpus_of(resources: dict[str, Any] | None) -> int | None:
    """The GPUs a resource list names (every accelerator resource summed); None if none."""
    if not resources:
        return None
    total, seen = Decimal(0), False
    for key, value in resources.items():
        if is_accelerator(str(key)):
            total += parse_quantity(value)
            seen = True
    return int(total) if seen else None


def _gpus(resources: dict[str, Decimal]) -> int | None:
    found = [v for k, v in resources.items() if is_accelerator(k)]
    return int(sum(found, Decimal(0))) if found else None


def _resources(check: Checker, obj: dict[str, Any], key: str, path: str) -> dict[str, Decimal]:
    found = check.mapping(obj, key, path) or {}
    out: dict[str, Decimal] = {}
    for resource, quantity in found.items():
        try:
            out[str(resource)] = parse_quantity(quantity)
        except ValueError as exc:
            check.fail(child(child(path, key), str(resource)), str(exc))
            continue
        if is_accelerator(str(resource)) and out[str(resource)] != int(out[str(resource)]):
            check.fail(child(child(path, key), str(resource)), "must be a whole number of GPUs")
    if (_gpus(out) or 0) > INT32_MAX:  # the GPU columns are 32-bit (a 500 on Postgres otherwise)
        check.fail(child(path, key), f"names more than {INT32_MAX} GPUs")
    return out


def _compare(
    check: Checker,
    capability: dict[str, Decimal],
    deserved: dict[str, Decimal],
    guarantee: dict[str, Decimal],
) -> None:
    """Volcano's webhook: guarantee <= deserved <= capability, per resource named in both."""
    for resource, amount in guarantee.items():
        if resource not in deserved:
            check.fail(
                child("spec.deserved", resource),
                f"deserved[{resource}] must be >= guarantee[{resource}]={amount}",
            )
        elif deserved[resource] < amount:
            check.fail(
                child("spec.deserved", resource),
                f"deserved[{resource}]={deserved[resource]} must be >= guarantee[{resource}]",
            )
        if resource in capability and capability[resource] < amount:
            check.fail(
                child("spec.guarantee.resource", resource),
                f"guarantee[{resource}]={amount} must be <= capability[{resource}]",
            )
    for resource, amount in deserved.items():
        if resource in capability and amount > capability[resource]:
            check.fail(
                child("spec.deserved", resource),
                f"deserved[{resource}]={amount} must be <= capability[{resource}]="
                f"{capability[resource]}",
            )


def _extend_clusters(check: Checker, spec: dict[str, Any]) -> None:
    for i, entry in enumerate(check.sequence(spec, "extendClusters", "spec") or []):
        path = f"spec.extendClusters[{i}]"
        if not isinstance(entry, dict):
            check.fail(path, "must be a mapping")
            continue
        check.unknown_fields(entry, frozenset({"name", "weight", "capacity"}), path)
        check.string(entry, "name", path)
        check.integer(entry, "weight", path)
        _resources(check, entry, "capacity", path)


def _affinity(check: Checker, spec: dict[str, Any]) -> None:
    affinity = check.mapping(spec, "affinity", "spec") or {}
    check.unknown_fields(affinity, frozenset(_AFFINITY_KINDS), "spec.affinity")
    for kind in _AFFINITY_KINDS:
        terms = check.mapping(affinity, kind, "spec.affinity") or {}
        path = f"spec.affinity.{kind}"
        check.unknown_fields(terms, frozenset(_AFFINITY_TERMS), path)
        for term in _AFFINITY_TERMS:
            for j, group in enumerate(check.sequence(terms, term, path) or []):
                if not isinstance(group, str):
                    check.fail(f"{path}.{term}[{j}]", "must be a string")


def _state(check: Checker, doc: dict[str, Any]) -> str:
    status = check.mapping(doc, "status", "") or {}
    state = status.get("state") or "Open"
    if state not in STATES:
        check.fail("status.state", f"queue state must be one of {', '.join(STATES)}")
        return "Open"
    return str(state)


def _hierarchy(
    check: Checker, annotations: dict[str, str], name: str | None
) -> tuple[tuple[str, float], ...]:
    """The `volcano.sh/hierarchy` path (`root/eng/prod`) with `volcano.sh/hierarchy-weights`
    (`1/2/8`), as Volcano's webhook checks them: as many weights as path parts, each > 0."""
    path, weights = annotations.get(HIERARCHY), annotations.get(HIERARCHY_WEIGHTS)
    if not path and not weights:
        return ()
    where = child("metadata.annotations", HIERARCHY_WEIGHTS)
    parts, values = (path or "").split("/"), (weights or "").split("/")
    if len(parts) != len(values):
        check.fail(
            where,
            f"{HIERARCHY} and {HIERARCHY_WEIGHTS} must have as many parts, got "
            f"{path!r} and {weights!r}",
        )
        return ()
    out = []
    for part, value in zip(parts, values, strict=True):
        try:
            weight = float(value)
        except ValueError:
            check.fail(where, f"{value!r} in {weights!r} is not a number")
            return ()
        if weight <= 0:
            check.fail(where, f"{value!r} in {weights!r} must be > 0")
            return ()
        out.append((part, weight))
    if parts[0] != ROOT:
        check.fail(child("metadata.annotations", HIERARCHY), f"must start with {ROOT}/")
    elif name is not None and parts[-1] != name:
        check.fail(
            child("metadata.annotations", HIERARCHY), f"must end with the queue's name {name}"
        )
    return tuple(out)


def _annotated_weight(hierarchy: tuple[tuple[str, float], ...]) -> int:
    if not hierarchy:
        return 1
    return max(1, min(MAX_WEIGHT, round(hierarchy[-1][1])))
