"""A HyperJob (training.volcano.sh/v1alpha1) read into its children and their split policy.

`replicatedJobs[].splitPolicy` (reserved in Volcano's HyperJob controller, which always splits
as written) is used here; docs/job-documents.md has the meaning:

- `static` (the default, and what no splitPolicy means): the user's split is kept - `replicas`
  child Volcano Jobs of the template, each whole in one cluster, only in `clusterNames` when
  given. `accelerators`, when given, must be what that split holds (replicas x the template's).
- `auto`: the replicated job is a pool of `accelerators` accelerators (default: replicas x the
  template's; when given, it is the total and `replicas` is not read) in pods of the template's
  one task; the placement splits the pool across up to `spec.maxDomains` clusters, at whole
  partitions, one child Volcano Job per cluster (`spec.minAvailable` does not apply: every
  child is needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from volcano_global.jobspec.fields import Checker, child
from volcano_global.jobspec.model import Gang, SubJob, TaskGang
from volcano_global.jobspec.plugins import read_plugins
from volcano_global.jobspec.volcano_job import JobSpecSummary, read_job_spec

HYPERJOB_FIELDS = frozenset({"minAvailable", "maxDomains", "replicatedJobs", "plugins"})
REPLICATED_JOB_FIELDS = frozenset(
    {"name", "replicas", "clusterNames", "templateSpec", "splitPolicy"}
)
SPLIT_POLICY_FIELDS = frozenset({"mode", "accelerators", "acceleratorType"})


@dataclass(frozen=True)
class HyperJobSummary:
    gang: Gang
    queue: str | None
    priority_class_name: str | None
    class_path: str
    max_domains: int | None
    auto_split: bool  # one replicated job in auto mode: the placement splits its pods


@dataclass
class _Children:
    """What the replicated jobs read so far add up to."""

    max_total_pods: int
    pods_left: int
    sub_jobs: list[SubJob] = field(default_factory=list)
    tasks: list[TaskGang] = field(default_factory=list)
    queues: dict[str, str] = field(default_factory=dict)  # by path
    classes: dict[str, str] = field(default_factory=dict)  # by path
    names: set[str] = field(default_factory=set)


def read_hyperjob(
    spec: dict[str, Any],
    check: Checker,
    *,
    gpu_model: str | None,
    max_total_pods: int,
) -> HyperJobSummary:
    check.unknown_fields(spec, HYPERJOB_FIELDS, "spec")
    read_plugins(spec, "spec", check, known=None)  # reserved in Volcano: kept, not acted on
    entries = check.sequence(spec, "replicatedJobs", "spec", required=True) or []
    children = _Children(max_total_pods=max_total_pods, pods_left=max_total_pods)
    for index, entry in enumerate(entries):
        _read_replicated_job(entry, child("spec.replicatedJobs", index), children, check, gpu_model)
    sub_jobs, tasks = children.sub_jobs, children.tasks
    auto = [s for s in sub_jobs if s.split_mode == "auto"]
    if auto and len(entries) > 1:
        _refuse_auto_among_several(entries, check)
    total_children = sum(s.replicas for s in sub_jobs)
    # 0 or absent: every child, as Volcano's HyperJob webhook defaults it.
    min_sub_jobs = check.integer(spec, "minAvailable", "spec", minimum=0) or None
    if auto:  # the placement decides how many children the pool becomes: all of them count
        min_sub_jobs = None
    elif min_sub_jobs is not None and sub_jobs and min_sub_jobs > total_children:
        check.fail("spec.minAvailable", f"must be <= the number of child jobs ({total_children})")
    max_domains = check.integer(spec, "maxDomains", "spec", minimum=1)
    queue = _one_value(children.queues, check, "queue")
    priority_class = _one_value(children.classes, check, "priorityClassName")
    class_path = next(
        iter(children.classes), "spec.replicatedJobs[0].templateSpec.priorityClassName"
    )
    gang = Gang(
        tasks=tasks,
        min_available=sum(s.min_available * s.replicas for s in sub_jobs),
        total_pods=sum(s.pods * s.replicas for s in sub_jobs),
        total_gpus=sum(s.gpus * s.replicas for s in sub_jobs),
        gpu_model=common_gpu_model([t for t in tasks if t.sub_job not in _idle(sub_jobs)]),
        sub_jobs=sub_jobs,
        min_sub_jobs=total_children if min_sub_jobs is None else min_sub_jobs,
    )
    return HyperJobSummary(
        gang=gang,
        queue=queue,
        priority_class_name=priority_class,
        class_path=class_path,
        max_domains=max_domains,
        auto_split=bool(auto),
    )


def _read_replicated_job(
    entry: Any, path: str, children: _Children, check: Checker, gpu_model: str | None
) -> None:
    """One `replicatedJobs[]` entry checked and, when readable, added to `children`."""
    if not isinstance(entry, dict):
        check.fail(path, "must be a mapping")
        return
    check.unknown_fields(entry, REPLICATED_JOB_FIELDS, path)
    name = check.dns_label(entry, "name", path, required=True)
    if name in children.names:
        check.fail(child(path, "name"), f"duplicate replicated job name {name!r}")
    # The CRD defaults an absent count to 1; 0 is a valid count (no child from this entry).
    replicas = check.integer(entry, "replicas", path, minimum=0)
    replicas = 1 if replicas is None else replicas
    clusters = check.sequence(entry, "clusterNames", path) or []
    for ci, cluster in enumerate(clusters):
        if not isinstance(cluster, str) or not cluster:
            check.fail(child(child(path, "clusterNames"), ci), "must be a cluster name")
    template = check.mapping(entry, "templateSpec", path, required=True)
    if template is None or name is None:
        return
    children.names.add(name)
    tpath = child(path, "templateSpec")
    pods_left, most = children.pods_left, children.max_total_pods
    summary = read_job_spec(
        template,
        tpath,
        check,
        sub_job=name,
        default_gpu_model=gpu_model,
        # (the replicas' total is checked below; once over, reported once)
        max_total_pods=pods_left if pods_left >= 0 else most,
    )
    sub_job = _split(entry, path, name, replicas, summary, check)
    if sub_job is None:
        return
    sub_job = sub_job.model_copy(update={"cluster_names": [str(c) for c in clusters]})
    total = sub_job.pods * sub_job.replicas
    if pods_left >= 0 and total > pods_left and summary.total_pods:
        check.fail(
            child(path, "replicas"),
            f"{sub_job.replicas} replicas of {sub_job.pods} pods ask for more than the "
            f"{most} pods a job may have",
        )
    children.pods_left -= total
    if summary.queue:
        children.queues[f"{tpath}.queue"] = summary.queue
    if summary.priority_class_name:
        children.classes[f"{tpath}.priorityClassName"] = summary.priority_class_name
    if sub_job.split_mode == "auto":
        children.tasks.append(_pool_task(summary.tasks[0], sub_job.pods))
    else:
        children.tasks.extend(summary.tasks)
    children.sub_jobs.append(sub_job)


def _refuse_auto_among_several(entries: list[Any], check: Checker) -> None:
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and isinstance(entry.get("splitPolicy"), dict):
            if entry["splitPolicy"].get("mode") == "auto":
                check.fail(
                    child(child(child("spec.replicatedJobs", index), "splitPolicy"), "mode"),
                    "auto splits a HyperJob of one replicated job; with several, use static "
                    "(each child whole in one cluster)",
                )


def _split(
    entry: dict[str, Any],
    path: str,
    name: str,
    replicas: int,
    summary: JobSpecSummary,
    check: Checker,
) -> SubJob | None:
    """The replicated job as a SubJob, its splitPolicy checked against its template."""
    child_gpus = sum(t.replicas * t.resources.gpus for t in summary.tasks)
    sub_job = SubJob(
        name=name,
        replicas=replicas,
        pods=summary.total_pods,
        gpus=child_gpus,
        min_available=summary.min_available,
        network_topology=summary.network_topology,
    )
    policy = check.mapping(entry, "splitPolicy", path)
    if policy is None:
        return sub_job
    spath = child(path, "splitPolicy")
    check.unknown_fields(policy, SPLIT_POLICY_FIELDS, spath)
    mode = policy.get("mode") or "static"
    if mode not in ("static", "auto"):
        check.fail(child(spath, "mode"), "must be static or auto")
        return None
    accelerators = check.integer(policy, "accelerators", spath, minimum=1)
    resource = check.string(policy, "acceleratorType", spath)
    used = {t.resources.gpu_resource for t in summary.tasks if t.resources.gpu_resource}
    if resource is not None and used and resource not in used:
        check.fail(
            child(spath, "acceleratorType"),
            f"the template asks for {', '.join(sorted(used))}, not {resource}",
        )
    if mode == "static":
        if accelerators is not None and accelerators != replicas * child_gpus:
            check.fail(
                child(spath, "accelerators"),
                f"static keeps the split as written: {replicas} replicas x {child_gpus} "
                f"accelerators = {replicas * child_gpus}, not {accelerators}",
            )
        return sub_job.model_copy(update={"accelerators": accelerators})
    return _auto_split(sub_job, summary, accelerators, spath, check)


def _auto_split(
    sub_job: SubJob,
    summary: JobSpecSummary,
    accelerators: int | None,
    spath: str,
    check: Checker,
) -> SubJob | None:
    """`mode: auto`: the template's one accelerator task as one pool of `accelerators` (by
    default the replicated job's own), its pods counted from the accelerators per pod."""
    replicas, child_gpus = sub_job.replicas, sub_job.gpus
    gpu_tasks = [t for t in summary.tasks if t.resources.gpus]
    if len(summary.tasks) != 1 or not gpu_tasks:
        check.fail(
            child(spath, "mode"),
            "auto splits the pods of one task asking for accelerators; this template has "
            f"{len(summary.tasks)} tasks ({len(gpu_tasks)} with accelerators)",
        )
        return None
    per_pod = gpu_tasks[0].resources.gpus
    total = replicas * child_gpus if accelerators is None else accelerators
    if total % per_pod or total == 0:
        check.fail(
            child(spath, "accelerators"),
            f"must be a positive multiple of the template's {per_pod} accelerators per pod",
        )
        return None
    pods = total // per_pod
    partition = gpu_tasks[0].partition
    if partition is not None and pods % partition.partition_size:
        check.fail(
            child(spath, "accelerators"),
            f"{pods} pods are not whole partitions of {partition.partition_size} pods",
        )
        return None
    return sub_job.model_copy(
        update={
            "replicas": 1,
            "pods": pods,
            "gpus": total,
            "min_available": pods,
            "split_mode": "auto",
            "accelerators": total,
        }
    )


def _pool_task(task: TaskGang, pods: int) -> TaskGang:
    """The template's one task grown (or shrunk) to the auto pool's pods."""
    partition = task.partition
    if partition is not None:
        partition = partition.model_copy(
            update={"total_partitions": pods // partition.partition_size}
        )
    return task.model_copy(update={"replicas": pods, "min_available": pods, "partition": partition})


def _one_value(values: dict[str, str], check: Checker, what: str) -> str | None:
    distinct = set(values.values())
    if len(distinct) > 1:
        for path in values:
            check.fail(
                path, f"all replicated jobs must use the same {what}, got {sorted(distinct)}"
            )
    return next(iter(distinct), None)


def common_gpu_model(tasks: list[TaskGang]) -> str | None:
    """The one GPU model the pods that run ask for (a task of replicas 0 runs none)."""
    models = {t.gpu_model for t in tasks if t.resources.gpus and t.replicas}
    return models.pop() if len(models) == 1 else None


def _idle(sub_jobs: list[SubJob]) -> set[str]:
    """The replicated jobs of replicas 0: their tasks run no pod."""
    return {s.name for s in sub_jobs if not s.replicas}
