"""A pod template's effective resource requests, computed as the kube-scheduler does:
sum of the containers (and restartable init containers, i.e. sidecars), or the largest
plain init container if that is more."""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from typing import Any

from volcano_global.bounds import CPU_MILLIS, GPUS_PER_POD, MEMORY_BYTES, Bound
from volcano_global.jobspec.accelerators import is_accelerator, template_model
from volcano_global.jobspec.fields import Checker, child
from volcano_global.jobspec.model import PodResources
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.jobspec.resource_names import unknown_resource

# A container's quantity in the unit its bound is counted in (a pod's totals are checked too).
_PER_POD = {"gpu": (1, GPUS_PER_POD), "cpu": (1000, CPU_MILLIS), "memory": (1, MEMORY_BYTES)}


def pod_resources(template: dict[str, Any], path: str, check: Checker) -> PodResources:
    spec = check.mapping(template, "spec", path, required=True)
    if spec is None:
        return PodResources()
    spec_path = child(path, "spec")
    containers = check.sequence(spec, "containers", spec_path, required=True) or []
    init_containers = check.sequence(spec, "initContainers", spec_path) or []

    seen: set[str] = set()
    repeated: set[str] = set()
    for container in (*containers, *init_containers):
        name = container.get("name") if isinstance(container, dict) else None
        if isinstance(name, str):
            (repeated if name in seen else seen).add(name)
    for name in sorted(repeated):
        check.fail(spec_path, f"container name {name!r} is used more than once")

    total: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for index, container in enumerate(init_containers):
        cpath = child(child(spec_path, "initContainers"), index)
        requests = _container_requests(container, cpath, check)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            _add(total, requests)  # a sidecar runs alongside the main containers
        else:
            for name, amount in requests.items():
                init_peak[name] = max(init_peak.get(name, Decimal(0)), amount)
    for index, container in enumerate(containers):
        _add(
            total,
            _container_requests(container, child(child(spec_path, "containers"), index), check),
        )
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), amount)

    accelerators = sorted(name for name in total if is_accelerator(name) and total[name] > 0)
    if len(accelerators) > 1:
        check.fail(spec_path, f"a pod may request one kind of accelerator, got {accelerators}")
    gpu_resource = accelerators[0] if accelerators else None
    gpus = int(total.get(gpu_resource, Decimal(0))) if gpu_resource else 0
    resources = PodResources(
        gpus=gpus,
        gpu_resource=gpu_resource,
        cpu_millis=int((total.get("cpu", Decimal(0)) * 1000).to_integral_value(ROUND_CEILING)),
        memory_bytes=int(total.get("memory", Decimal(0)).to_integral_value(ROUND_CEILING)),
    )
    for what, amount, bound in (
        ("GPUs", resources.gpus, GPUS_PER_POD),
        ("CPU", resources.cpu_millis, CPU_MILLIS),
        ("memory", resources.memory_bytes, MEMORY_BYTES),
    ):
        _within(spec_path, f"the pod's {what}", amount, bound, check)
    return resources


def gpu_model_from_template(template: dict[str, Any], resources: PodResources) -> str | None:
    spec = template.get("spec")
    selector = spec.get("nodeSelector") if isinstance(spec, dict) else None
    return template_model(selector if isinstance(selector, dict) else {}, resources.gpu_resource)


def _container_requests(container: Any, path: str, check: Checker) -> dict[str, Decimal]:
    if not isinstance(container, dict):
        check.fail(path, "must be a mapping")
        return {}
    check.dns_label(container, "name", path, required=True)  # as Kubernetes requires
    resources = check.mapping(container, "resources", path)
    if resources is None:
        return {}
    rpath = child(path, "resources")
    requests = _quantities(
        check.mapping(resources, "requests", rpath), child(rpath, "requests"), check
    )
    limits = _quantities(check.mapping(resources, "limits", rpath), child(rpath, "limits"), check)
    effective = dict(limits)  # a request left out defaults to its limit
    effective.update(requests)
    for name, amount in effective.items():
        field = child(child(rpath, "requests" if name in requests else "limits"), name)
        if name in requests and name in limits and requests[name] > limits[name]:
            check.fail(field, f"must be <= the limit {limits[name]}")
        limit = _PER_POD.get("gpu" if is_accelerator(name) else name)
        if limit is not None and amount * limit[0] > limit[1].high:
            check.fail(field, f"must be at most {limit[1].high / limit[0]:g} ({limit[1].name})")
            effective[name] = Decimal(0)  # refused: the pod's sums leave it out
            continue
        if is_accelerator(name):
            if amount != amount.to_integral_value():
                check.fail(field, "must be a whole number of devices")
            if name in requests and name in limits and requests[name] != limits[name]:
                check.fail(
                    field, "must equal the limit (extended resources cannot be overcommitted)"
                )
    return effective


def _within(path: str, what: str, amount: int, bound: Bound, check: Checker) -> None:
    if amount > bound.high:
        check.fail(path, f"{what} ({amount}) must be at most {bound.high:g} {bound.unit}")


def _quantities(values: dict[str, Any] | None, path: str, check: Checker) -> dict[str, Decimal]:
    result: dict[str, Decimal] = {}
    for name, raw in (values or {}).items():
        if refused := unknown_resource(str(name)):
            check.fail(child(path, str(name)), refused)
            continue
        try:
            result[str(name)] = parse_quantity(raw)
        except ValueError as exc:
            check.fail(child(path, str(name)), str(exc))
    return result


def _add(total: dict[str, Decimal], amounts: dict[str, Decimal]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, Decimal(0)) + amount
