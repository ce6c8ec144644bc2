"""A share of a global job as the Volcano Jobs its member cluster runs.

The job's ranked pods (`ranks.py`: its GPU pods, or all of a job without any) are ranked in
document order (tasks in order, replicas in order; for a HyperJob, replicated jobs in order,
each replica's tasks in order). A share owns the ranks [rank_offset, rank_offset + pods): each
ranked task keeps the replicas whose ranks fall there, so TP/PP groups laid out in rank order
stay together; a task without GPUs in a job with GPU pods (an MPI master) goes whole with the
share of its Volcano Job's first rank. Everything else in the user's document is kept:
its labels and annotations (Volcano reads `volcano.sh/preemptable`, `revocable-zone`, plugins'
settings from the Job), `networkTopology`, `partitionPolicy` (partition counts recomputed for
the share's replicas: split units hold whole partitions, see normalize), policies, plugins, the
pod templates. `minAvailable` becomes the share's pod count (the gang inside the cluster; the
Global holds the gang across clusters); `minSuccess` is scaled to the share (`_min_success`).
Names: `naming.py`.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import yaml

from volcano_global.jobspec.extensions import COMMUNICATION
from volcano_global.jobspec.model import Gang
from volcano_global.jobspec.naming import (
    member_job_name,
    rendezvous_service_name,
    volcano_job_specs,
)
from volcano_global.jobspec.ranks import child_tasks, document_ranked_flags, ranked_tasks
from volcano_global.rpc.shares import ShareAssignment

VOLCANO_API_VERSION = "batch.volcano.sh/v1alpha1"
RENDEZVOUS_PORT = 29500
LABEL_PREFIX = "global.volcano.sh/"
PLACEMENT_LABEL = LABEL_PREFIX + "placement"
JOB_UID_LABEL = LABEL_PREFIX + "job-uid"
CLUSTER_INDEX_LABEL = LABEL_PREFIX + "cluster-index"
MEMBERS_ANNOTATION = LABEL_PREFIX + "members"  # how many Volcano Jobs the share has
TASK_POD_OFFSET = "VGLOBAL_TASK_POD_OFFSET"  # the place in the share of a task's first pod


__all__ = [
    "member_job_name",
    "member_jobs",
    "rank_0_task",
    "rendezvous_address",
    "share_member_name",
]


def share_member_name(manifest: dict[str, Any], share: ShareAssignment) -> str:
    """The share's member base name: the Global's (every share of a placement has the same),
    or for an assignment without one the same name derived again."""
    return share.member_job_name or member_job_name(
        share.job_name, share.placement_id, manifest=manifest
    )


def rendezvous_address(
    manifest: dict[str, Any], *, member: str, namespace: str, split: bool
) -> str:
    """Where rank 0 listens. One cluster: rank 0's pod's DNS name under the headless service
    Volcano's `svc` plugin creates. Split: the `<member>-rdzv` service the rank-0 cluster's
    agent exports through Multi-Cluster Services (`clusterset.local`)."""
    if split:
        service = rendezvous_service_name(member)
        return f"{service}.{namespace}.svc.clusterset.local:{RENDEZVOUS_PORT}"
    job, spec = _volcano_jobs(manifest, member)[0]
    return f"{job}-{rank_0_task(spec)}-0.{job}.{namespace}.svc:{RENDEZVOUS_PORT}"


def rank_0_task(spec: dict[str, Any]) -> str:
    """The task of a Volcano Job's first rank: the first ranked task that has pods (a task of
    replicas 0 has none; an MPI master without GPUs beside GPU workers holds no rank)."""
    tasks = spec.get("tasks") or []
    for task, ranked in zip(tasks, document_ranked_flags(spec), strict=True):
        if ranked and int(task.get("replicas", 0)) > 0:
            return str(task.get("name", "task"))
    return "task"


def rendezvous_env(share: ShareAssignment, *, api_url: str = "") -> dict[str, str]:
    """The environment every container of the share gets (read by the SDK's runtime helper).
    `api_url`: the Global's REST address as the pods reach it (the agent's --global-api)."""
    env = {
        "VGLOBAL_JOB_UID": share.job_uid,
        "VGLOBAL_PLACEMENT_ID": share.placement_id,
        "VGLOBAL_WORLD_PODS": str(share.world_pods),
        "VGLOBAL_SHARE_PODS": str(share.pods),
        "VGLOBAL_RANK_OFFSET": str(share.rank_offset),
        "VGLOBAL_CLUSTER_INDEX": str(share.cluster_index),
        "VGLOBAL_CLUSTER_COUNT": str(share.cluster_count),
        "VGLOBAL_RENDEZVOUS_ADDR": share.rendezvous_address,
    }
    if api_url:
        env["VGLOBAL_API"] = api_url
    if share.job_token:
        env["VGLOBAL_JOB_TOKEN"] = share.job_token
    return env


def parallelism_env(manifest: dict[str, Any], *, world_pods: int | None = None) -> str:
    """`tp=8,pp=4,cp=1,dp=16` from the job's communication declaration ("" without one).
    With `world_pods` below the document's pods (an elastic job placed narrower), `dp` is the
    data-parallel width placed: the declared one in proportion."""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(COMMUNICATION)
    if not isinstance(text, str):
        return ""
    try:
        plan = yaml.safe_load(text)
    except yaml.YAMLError:
        return ""
    if not isinstance(plan, dict):
        return ""
    keys = (
        ("tp", "tensorParallel"),
        ("pp", "pipelineParallel"),
        ("cp", "contextParallel"),
        ("dp", "dataParallel"),
    )
    sizes = {short: int(plan[key]) for short, key in keys if isinstance(plan.get(key), int)}
    declared = sum(
        int(t.get("replicas", 1))
        for _, spec in volcano_job_specs(manifest)
        for t, ranked in zip(spec.get("tasks") or [], document_ranked_flags(spec), strict=True)
        if ranked
    )
    if "dp" in sizes and world_pods is not None and declared and world_pods != declared:
        sizes["dp"] = sizes["dp"] * world_pods // declared
    return ",".join(f"{short}={size}" for short, size in sizes.items())


def member_jobs(
    manifest: dict[str, Any], share: ShareAssignment, *, api_url: str = ""
) -> list[dict[str, Any]]:
    """The Volcano Job documents of one share (one per Job; one per HyperJob child that has
    pods in the share)."""
    member = share_member_name(manifest, share)
    first, last = share.rank_offset, share.rank_offset + share.pods
    env = [{"name": k, "value": v} for k, v in rendezvous_env(share, api_url=api_url).items()]
    parallelism = parallelism_env(manifest, world_pods=share.world_pods)
    if parallelism:
        env.append({"name": "VGLOBAL_PARALLELISM", "value": parallelism})
    metadata = manifest.get("metadata") or {}
    user_labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    user_annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}
    documents = []
    rank = 0
    for name, spec in _volcano_jobs(manifest, member):
        spec = copy.deepcopy(spec)
        # An absent task count is 0, as Volcano reads it (an unset int32) and the parser did.
        total = sum(int(t.get("replicas", 0)) for t in spec.get("tasks") or [])
        kept, rank = _kept_replicas(spec, rank, first=first, last=last)
        tasks = [
            _task_share(task, count, env + _task_env(start))
            for task, (count, start) in zip(spec.get("tasks") or [], kept, strict=True)
            if count
        ]
        if not tasks:
            continue
        pods = sum(t["replicas"] for t in tasks)
        every = {t.get("name") for t in spec.get("tasks") or []}
        spec["tasks"] = _local_dependencies(tasks, elsewhere=every - {t["name"] for t in tasks})
        spec["minAvailable"] = pods
        if spec.get("minSuccess") is not None:
            spec["minSuccess"] = _min_success(int(spec["minSuccess"]), pods, whole=total)
        documents.append(
            {
                "apiVersion": VOLCANO_API_VERSION,
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "namespace": share.namespace,
                    # The user's first, the Global's over them: the agent finds its jobs by these.
                    "labels": {
                        **user_labels,
                        PLACEMENT_LABEL: share.placement_id,
                        JOB_UID_LABEL: share.job_uid,
                        CLUSTER_INDEX_LABEL: str(share.cluster_index),
                    },
                    "annotations": {
                        **user_annotations,
                        LABEL_PREFIX + "job-name": share.job_name,
                        LABEL_PREFIX + "generation": str(share.generation),
                        LABEL_PREFIX + "ranks": f"{first}-{last - 1}",
                    },
                },
                "spec": spec,
            }
        )
    for document in documents:
        document["metadata"]["annotations"][MEMBERS_ANNOTATION] = str(len(documents))
    return documents


def ranks_gpu_model(gang: Gang, first: int, pods: int) -> str | None:
    """The one GPU model the pods of ranks [first, first + pods) ask for (None: none names
    one, or they ask for several): a share's of a HyperJob whose children differ."""
    tasks = ranked_tasks(gang.tasks)
    if gang.sub_jobs:  # every child in rank order: its replicated job's tasks, per replica
        tasks = [
            t
            for s in gang.sub_jobs
            for _ in range(s.replicas)
            for t in ranked_tasks(child_tasks(gang, s))
        ]
    models, rank = set(), 0
    for task in tasks:
        # a task of no replicas has no pods to run (the solver's requests leave it out)
        if (
            task.replicas
            and task.resources.gpus
            and rank < first + pods
            and first < rank + task.replicas
        ):
            models.add(task.gpu_model)
        rank += task.replicas
    return models.pop() if len(models) == 1 else None


def _kept_replicas(
    spec: dict[str, Any], rank: int, *, first: int, last: int
) -> tuple[list[tuple[int, int | None]], int]:
    """How many replicas of each task of one Volcano Job (whose first ranked pod is `rank`)
    the share of ranks [first, last) runs, with the place in the share of the first of them
    (None for a task without rank), and the rank after the Job's. A ranked task keeps its
    replicas whose ranks fall in the share; a task without rank (`ranks.py`: no GPUs in a Job
    with GPU pods) goes whole with the share of the Job's first ranked pod."""
    tasks = spec.get("tasks") or []
    flags = document_ranked_flags(spec)
    pods = sum(int(t.get("replicas", 0)) for t, ranked in zip(tasks, flags, strict=True) if ranked)
    holds_first = pods > 0 and first <= rank < last
    kept: list[tuple[int, int | None]] = []
    for task, ranked in zip(tasks, flags, strict=True):
        replicas = int(task.get("replicas", 0))
        if not ranked:
            kept.append((replicas if holds_first else 0, None))
            continue
        start = max(first, rank)
        kept.append((max(0, min(last, rank + replicas) - start), start - first))
        rank += replicas
    return kept, rank


def _task_env(start: int | None) -> list[dict[str, str]]:
    """A ranked task's place in the share: Volcano's `VC_TASK_INDEX` counts a pod within its
    task, so a pod's place in the share is this plus its index (`sdk/runtime.py`)."""
    return [] if start is None else [{"name": TASK_POD_OFFSET, "value": str(start)}]


def _volcano_jobs(manifest: dict[str, Any], member: str) -> list[tuple[str, dict[str, Any]]]:
    """(member Volcano Job name, JobSpec) in rank order."""
    return [(member + suffix, spec) for suffix, spec in volcano_job_specs(manifest)]


def _local_dependencies(
    tasks: list[dict[str, Any]], *, elsewhere: set[Any]
) -> list[dict[str, Any]]:
    """Tasks without `dependsOn` names of tasks another cluster holds (`elsewhere`): Volcano's
    webhook refuses a dependency on a task the Job lacks (it is no DAG) and its controller
    would wait for it for ever. The order across clusters is the cross-cluster gang's: every
    share starts together or not at all. A name no task of the document has stays, for Volcano
    to refuse as it would the user's own Job."""
    for task in tasks:
        depends = task.get("dependsOn")
        if not isinstance(depends, dict) or not isinstance(depends.get("name"), list):
            continue
        kept = [n for n in depends["name"] if n not in elsewhere]
        if kept:
            depends["name"] = kept
        else:
            del task["dependsOn"]
    return tasks


def _min_success(min_success: int, pods: int, *, whole: int) -> int:
    """The user's `minSuccess` for `pods` of the job's `whole`: its share, rounded up. The
    shares' minimums add up to at least the user's, so every share Completed means the job met
    its minSuccess; a share may fail although the job as a whole would have succeeded with
    other shares' surplus (conservative: Succeeded is never reported wrongly). Volcano's CRD
    wants at least 1; a minSuccess above the job's pods is capped at the share's."""
    if whole <= 0:
        return max(1, min(min_success, pods))
    return max(1, min(pods, math.ceil(min_success * pods / whole)))


def _task_share(task: dict[str, Any], replicas: int, env: list[dict[str, str]]) -> dict[str, Any]:
    task = copy.deepcopy(task)
    task["replicas"] = replicas
    if "minAvailable" in task:
        task["minAvailable"] = min(int(task["minAvailable"]), replicas)
    partition = task.get("partitionPolicy")
    if isinstance(partition, dict) and partition.get("partitionSize"):
        size = int(partition["partitionSize"])
        if replicas % size:  # normalize never splits a unit inside a partition
            raise ValueError(
                f"task {task.get('name')!r}: {replicas} replicas are not whole partitions of {size}"
            )
        total = replicas // size
        partition["totalPartitions"] = total
        if int(partition.get("minPartitions") or 0) > 0:
            partition["minPartitions"] = min(int(partition["minPartitions"]), total)
            if "minAvailable" in task:  # Volcano: minAvailable = minPartitions x partitionSize
                task["minAvailable"] = partition["minPartitions"] * size
    pod_spec = task.setdefault("template", {}).setdefault("spec", {})
    names = {e["name"] for e in env}
    for container in pod_spec.get("containers") or []:
        container["env"] = [e for e in container.get("env") or [] if e.get("name") not in names]
        container["env"] += copy.deepcopy(env)
    return task
