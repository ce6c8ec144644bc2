"""Rules of Volcano's Job webhook and CRD beyond the shape of the gang (Volcano ed72c7c,
`pkg/webhooks/admission/jobs/validate/`, `config/crd/volcano/bases/batch.volcano.sh_jobs.yaml`):

- tasks' `dependsOn` form a DAG of the Job's own tasks (`topoSort`: a name no task has never
  drops to in-degree 0, so it fails as a cycle does);
- a task with `partitionPolicy.minPartitions` > 0 and a `minAvailable` has
  minAvailable = minPartitions x partitionSize;
- a task with a `topologyPolicy` other than none asks for whole CPUs in every container
  (`validateTaskTopoPolicy`, requests falling back to limits);
- `volumes`: each with a mountPath (no ':'), not repeated, a volumeClaim or a
  volumeClaimName but not both (`validateIO`);
- `queue` and `priorityClassName` are DNS subdomains (at most 253), `schedulerName` at most 63.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from volcano_global.jobspec.fields import Checker, child
from volcano_global.jobspec.object_metadata import SUBDOMAIN
from volcano_global.jobspec.quantity import parse_quantity


def check_job_rules(spec: dict[str, Any], path: str, check: Checker) -> None:
    tasks = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    _check_dag(tasks, path, check)
    for index, task in enumerate(spec.get("tasks") or []):
        # The two task rules apply only to a task with a partition policy or a topology
        # policy: most tasks skip them (and the building of their path).
        if isinstance(task, dict) and (
            "partitionPolicy" in task or task.get("topologyPolicy") not in (None, "", "none")
        ):
            tpath = child(child(path, "tasks"), index)
            _check_partition_minimum(task, tpath, check)
            _check_whole_cpus(task, tpath, check)
    _check_volumes(spec, path, check)
    for key, longest in (("queue", 253), ("priorityClassName", 253)):
        value = spec.get(key)
        if (
            isinstance(value, str)
            and value
            and (len(value) > longest or not SUBDOMAIN.fullmatch(value))
        ):
            check.fail(
                child(path, key), f"{value!r} is not a DNS subdomain (lowercase, at most {longest})"
            )
    scheduler = spec.get("schedulerName")
    if isinstance(scheduler, str) and len(scheduler) > 63:
        check.fail(child(path, "schedulerName"), "must be at most 63 characters")


def _check_dag(tasks: list[dict[str, Any]], path: str, check: Checker) -> None:
    names = [t.get("name") for t in tasks]
    depends: dict[Any, list[Any]] = {}
    for task in tasks:
        raw = task.get("dependsOn")
        if isinstance(raw, dict) and isinstance(raw.get("name"), list):
            depends[task.get("name")] = raw["name"]
    if not depends:
        return
    done: set[Any] = set()
    progress = True
    while progress:  # Kahn's order: a task is ready once every task it waits for is
        progress = False
        for name in names:
            if name not in done and all(d in done for d in depends.get(name, [])):
                done.add(name)
                progress = True
    for index, task in enumerate(tasks):
        if task.get("name") not in done:
            missing = [d for d in depends.get(task.get("name"), []) if d not in names]
            why = (
                f"names no task of the job: {missing}"
                if missing
                else "the tasks' dependencies do not form a directed acyclic graph"
            )
            check.fail(child(child(child(path, "tasks"), index), "dependsOn"), why)


def _check_partition_minimum(task: dict[str, Any], path: str, check: Checker) -> None:
    policy = task.get("partitionPolicy")
    minimum = task.get("minAvailable")
    if not isinstance(policy, dict) or not isinstance(minimum, int):
        return
    partitions, size = policy.get("minPartitions"), policy.get("partitionSize")
    if isinstance(partitions, int) and isinstance(size, int) and partitions > 0:
        if partitions * size != minimum:
            check.fail(
                child(path, "minAvailable"),
                f"must be minPartitions x partitionSize ({partitions} x {size} = "
                f"{partitions * size})",
            )


def _check_whole_cpus(task: dict[str, Any], path: str, check: Checker) -> None:
    if task.get("topologyPolicy") in (None, "", "none"):
        return
    spec = (task.get("template") or {}).get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for index, container in enumerate(containers):
        resources = container.get("resources") if isinstance(container, dict) else None
        resources = resources if isinstance(resources, dict) else {}
        amounts = resources.get("requests") or resources.get("limits") or {}
        try:
            cpu = parse_quantity(amounts.get("cpu", 0)) if isinstance(amounts, dict) else Decimal(0)
        except ValueError:
            continue  # reported where the pod's resources are read
        if cpu == 0 or cpu != cpu.to_integral_value():
            check.fail(
                child(path, "topologyPolicy"),
                f"needs whole CPUs requested by every container (container {index} asks for "
                f"{cpu or 'none'})",
            )
            return


def _check_volumes(spec: dict[str, Any], path: str, check: Checker) -> None:
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        return
    seen: set[str] = set()
    for index, volume in enumerate(volumes):
        vpath = child(child(path, "volumes"), index)
        if not isinstance(volume, dict):
            check.fail(vpath, "must be a mapping")
            continue
        mount = volume.get("mountPath")
        if not isinstance(mount, str) or not mount or ":" in mount:
            check.fail(child(vpath, "mountPath"), "required, without ':'")
        elif mount in seen:
            check.fail(child(vpath, "mountPath"), f"duplicated mountPath {mount}")
        else:
            seen.add(mount)
        claim, claim_name = volume.get("volumeClaim"), volume.get("volumeClaimName")
        if claim is None and not claim_name:
            check.fail(vpath, "either volumeClaim or volumeClaimName must be specified")
        elif claim is not None and claim_name:
            check.fail(
                child(vpath, "volumeClaimName"),
                "give volumeClaimName for an existing claim or volumeClaim for a new one, not both",
            )
