"""A Volcano `JobSpec` (batch.volcano.sh/v1alpha1) read into tasks with per-pod resources.

Every JobSpec and TaskSpec field Volcano defines is accepted (and kept in the stored
document); a field Volcano does not define is refused, as the API server's strict field
validation does, so that a typo such as `minAvaliable` is not silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from volcano_global.bounds import DURATION_S
from volcano_global.jobspec.accelerators import resource_model
from volcano_global.jobspec.durations import EXAMPLES, go_duration_seconds
from volcano_global.jobspec.fields import Checker, child
from volcano_global.jobspec.job_rules import check_job_rules
from volcano_global.jobspec.model import Partition, TaskGang, TopologyRequirement
from volcano_global.jobspec.plugins import JOB_PLUGINS, check_mpi_master, read_plugins
from volcano_global.jobspec.pods import gpu_model_from_template, pod_resources
from volcano_global.jobspec.policies import check_policies

JOB_SPEC_FIELDS = frozenset(
    {
        "schedulerName",
        "minAvailable",
        "volumes",
        "tasks",
        "policies",
        "plugins",
        "runningEstimate",
        "queue",
        "maxRetry",
        "ttlSecondsAfterFinished",
        "priorityClassName",
        "minSuccess",
        "networkTopology",
    }
)
TASK_FIELDS = frozenset(
    {
        "name",
        "replicas",
        "minAvailable",
        "template",
        "policies",
        "topologyPolicy",
        "maxRetry",
        "dependsOn",
        "partitionPolicy",
    }
)
NETWORK_TOPOLOGY_FIELDS = frozenset({"mode", "highestTierAllowed", "highestTierName"})
PARTITION_FIELDS = frozenset(
    {"totalPartitions", "partitionSize", "networkTopology", "minPartitions"}
)


@dataclass(frozen=True)
class JobSpecSummary:
    tasks: list[TaskGang]
    min_available: int
    total_pods: int
    queue: str | None
    priority_class_name: str | None
    network_topology: TopologyRequirement | None
    max_retry: int | None
    plugins: frozenset[str] = frozenset()  # Volcano job plugins named (`ssh`, `mpi`, ...)


def read_job_spec(
    spec: dict[str, Any],
    path: str,
    check: Checker,
    *,
    sub_job: str | None = None,
    default_gpu_model: str | None = None,
    max_total_pods: int,
) -> JobSpecSummary:
    check.unknown_fields(spec, JOB_SPEC_FIELDS, path)
    tasks_raw = check.sequence(spec, "tasks", path, required=True) or []
    tasks: list[TaskGang] = []
    seen: set[str] = set()
    for index, raw in enumerate(tasks_raw):
        tpath = child(child(path, "tasks"), index)
        if not isinstance(raw, dict):
            check.fail(tpath, "must be a mapping")
            continue
        task = _read_task(raw, tpath, check, index, sub_job, default_gpu_model)
        if task is None:
            continue
        if task.name in seen:
            check.fail(child(tpath, "name"), f"duplicate task name {task.name!r}")
        seen.add(task.name)
        tasks.append(task)

    total_pods = sum(t.replicas for t in tasks)
    if tasks and len(tasks) == len(tasks_raw) and total_pods == 0:
        # Volcano takes a Job whose every task has replicas 0 (and runs nothing); the Global
        # has nothing to place, so it says so rather than keep a job that can never start.
        check.fail(child(path, "tasks"), "every task has replicas: 0; the job has no pods to run")
    if total_pods > max_total_pods:
        check.fail(child(path, "tasks"), f"asks for {total_pods} pods; at most {max_total_pods}")
    # Absent or 0: the sum of the tasks' (each task's replicas where it sets none), as
    # Volcano's mutating webhook defaults it.
    min_available = check.integer(spec, "minAvailable", path, minimum=0) or None
    if min_available is None:
        min_available = sum(t.min_available for t in tasks)
    elif tasks and len(tasks) == len(tasks_raw) and min_available > total_pods:
        check.fail(
            child(path, "minAvailable"),
            f"must be <= the total replicas of all tasks ({total_pods})",
        )
    check_policies(spec, path, check)
    check_job_rules(spec, path, check)
    plugins = read_plugins(spec, path, check, known=JOB_PLUGINS)
    check_mpi_master(plugins, [t.name for t in tasks], path, check)
    max_retry = check.integer(spec, "maxRetry", path, minimum=0)
    check.integer(spec, "minSuccess", path, minimum=1)
    check.integer(spec, "ttlSecondsAfterFinished", path, minimum=0)
    check.string(spec, "schedulerName", path)
    _check_estimate(spec.get("runningEstimate"), child(path, "runningEstimate"), check)
    return JobSpecSummary(
        tasks=tasks,
        min_available=min_available,
        total_pods=total_pods,
        queue=check.string(spec, "queue", path),
        priority_class_name=check.string(spec, "priorityClassName", path),
        network_topology=read_network_topology(spec, "networkTopology", path, check),
        max_retry=max_retry,
        plugins=frozenset(plugins),
    )


def _check_estimate(estimate: object, path: str, check: Checker) -> None:
    """A `runningEstimate` must be a Go duration (metav1.Duration) within the bounds: "1d",
    "90" or "2h30" would be read as no estimate at all, so they are refused, naming it."""
    if estimate is None:
        return
    if not isinstance(estimate, str):
        check.fail(path, f"must be {EXAMPLES}")
        return
    try:
        why = DURATION_S.check(go_duration_seconds(estimate))
    except ValueError as exc:
        why = str(exc)
    if why:
        check.fail(path, why)


def _read_task(
    raw: dict[str, Any],
    path: str,
    check: Checker,
    index: int,
    sub_job: str | None,
    default_gpu_model: str | None,
) -> TaskGang | None:
    check.unknown_fields(raw, TASK_FIELDS, path)
    name = check.dns_label(raw, "name", path) or f"default{index}"
    # 0 is a valid count (the CRD's minimum), and what an absent one is (an int32 left
    # unset): the task runs no pod, beside tasks that do.
    replicas = check.integer(raw, "replicas", path, minimum=0)
    if replicas is None and "replicas" not in raw:
        replicas = 0
    min_available = check.integer(raw, "minAvailable", path, minimum=0)
    if replicas is not None and min_available is not None and min_available > replicas:
        check.fail(child(path, "minAvailable"), f"must be <= replicas ({replicas})")
    check.integer(raw, "maxRetry", path, minimum=0)
    check_policies(raw, path, check)
    topology_policy = raw.get("topologyPolicy")
    if topology_policy not in (None, "none", "best-effort", "restricted", "single-numa-node"):
        check.fail(
            child(path, "topologyPolicy"),
            "must be one of none, best-effort, restricted, single-numa-node",
        )
    template = check.mapping(raw, "template", path, required=True)
    resources = pod_resources(template, child(path, "template"), check) if template else None
    partition = _read_partition(raw, path, check, replicas)
    if replicas is None or resources is None or template is None:
        return None
    model = gpu_model_from_template(template, resources) or default_gpu_model
    implied = resource_model(resources.gpu_resource) if resources.gpu_resource else None
    if implied and default_gpu_model and implied != default_gpu_model:
        # An Ascend resource names its chip: a job pinned to another model could never start.
        check.fail(
            child(path, "template"),
            f"asks for {resources.gpu_resource} ({model}), not the job's GPU model "
            f"{default_gpu_model!r}",
        )
    if min_available is None:
        # Volcano's mutating webhook: minPartitions x partitionSize when minPartitions is set.
        min_available = replicas
        if partition is not None and partition.min_partitions > 0:
            min_available = partition.min_partitions * partition.partition_size
    return TaskGang(
        name=name,
        replicas=replicas,
        min_available=min_available,
        resources=resources,
        gpu_model=model,
        partition=partition,
        sub_job=sub_job,
    )


def _read_partition(
    task: dict[str, Any], path: str, check: Checker, replicas: int | None
) -> Partition | None:
    raw = check.mapping(task, "partitionPolicy", path)
    if raw is None:
        return None
    ppath = child(path, "partitionPolicy")
    check.unknown_fields(raw, PARTITION_FIELDS, ppath)
    total = check.integer(raw, "totalPartitions", ppath, required=True, minimum=1)
    size = check.integer(raw, "partitionSize", ppath, required=True, minimum=1)
    minimum = check.integer(raw, "minPartitions", ppath, minimum=0) or 0
    topology = read_network_topology(raw, "networkTopology", ppath, check)
    if total is None or size is None:
        return None
    if replicas is not None and total * size != replicas:
        check.fail(
            ppath,
            f"totalPartitions x partitionSize ({total} x {size} = {total * size}) "
            f"must equal replicas ({replicas})",
        )
    if minimum > total:
        check.fail(child(ppath, "minPartitions"), f"must be <= totalPartitions ({total})")
    return Partition(
        total_partitions=total,
        partition_size=size,
        min_partitions=minimum,
        network_topology=topology,
    )


def read_network_topology(
    obj: dict[str, Any], key: str, path: str, check: Checker
) -> TopologyRequirement | None:
    raw = check.mapping(obj, key, path)
    if raw is None:
        return None
    npath = child(path, key)
    check.unknown_fields(raw, NETWORK_TOPOLOGY_FIELDS, npath)
    mode = raw.get("mode", "hard")
    if mode not in ("hard", "soft"):
        check.fail(child(npath, "mode"), "must be hard or soft")
        mode = "hard"
    # 0 is allowed (the CRD's minimum; a tier-0 HyperNode is one node where HyperNodes are
    # discovered from node labels): see docs/job-documents.md for what the Global does with it.
    tier = check.integer(raw, "highestTierAllowed", npath, minimum=0)
    tier_name = check.string(raw, "highestTierName", npath)
    if tier is not None and tier_name is not None:
        check.fail(npath, "highestTierAllowed and highestTierName cannot both be set")
    if mode == "hard" and tier is None and tier_name is None:
        tier = 1  # Volcano's default for hard mode
    return TopologyRequirement(mode=mode, highest_tier_allowed=tier, highest_tier_name=tier_name)
