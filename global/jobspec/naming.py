"""Names of what a share creates in its member cluster, short enough for Kubernetes and Volcano
whatever name the user gave the job.

What the names must pass (Volcano ed72c7c, `pkg/webhooks/admission/jobs/validate`, and its
`svc` plugin): the Job's name and `<job>-<task>-<i>` (i: the task's position) are qualified
names, at most 63 characters; the `svc` plugin then creates a headless Service named after the
Job (a DNS-1035 label: a letter first, no dots) and gives each pod the hostname
`<job>-<task>-<replica>` (a DNS-1123 label, 63). The agent adds the Service `<member>-rdzv`.
A member Volcano Job is `<prefix>-<hash>`: the hash of the job's name and the placement keeps
one job's placements apart (a requeued job never meets its previous placement's leftovers),
the prefix is as much of the job's name as leaves room for every derived name. The same inputs
give the same name, so the Global computes it once and an agent finds it again after a restart.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from volcano_global.jobspec.ranks import task_gpus

MAX_NAME = 63  # a DNS label, and Volcano's qualified-name limit
RENDEZVOUS_SUFFIX = "-rdzv"
HASH_CHARS = 8
MIN_HASH_CHARS = 4  # below this, one namespace's placements of a job could collide
_NOT_DNS1035 = re.compile(r"[^a-z0-9-]")


def member_job_name(job_name: str, placement_id: str, *, manifest: dict[str, Any]) -> str:
    """The base name of a placement's member Volcano Jobs (a HyperJob's children add
    `-<replicatedJob>-<i>`), a DNS-1035 label leaving room for every pod and Service name."""
    budget = name_budget(manifest)
    digest = hashlib.sha256(f"{job_name}\0{placement_id}".encode()).hexdigest()
    prefix = _dns1035(job_name)[: max(0, budget - HASH_CHARS - 1)].rstrip("-")
    if prefix:
        return f"{prefix}-{digest[:HASH_CHARS]}"
    # No room for the job's name (task names near Volcano's limit) or nothing usable in it:
    # the hash alone, after a letter. Below MIN_HASH_CHARS some pod names may exceed 63 and
    # the member cluster refuses the Job: the share fails naming the pod, never a crash here.
    return "v" + digest[: max(MIN_HASH_CHARS, min(HASH_CHARS, budget - 1))]


def rendezvous_service_name(member: str) -> str:
    return member + RENDEZVOUS_SUFFIX


def volcano_job_specs(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(suffix of the member name, JobSpec) of each Volcano Job the document runs, in rank
    order: one for a Job; a HyperJob's children `-<replicatedJob>-<i>`, as Volcano's HyperJob
    controller names them."""
    spec = manifest.get("spec") or {}
    if manifest.get("kind") != "HyperJob":
        return [("", spec)]
    specs = []
    for replicated in spec.get("replicatedJobs") or []:
        name, template = replicated.get("name", "job"), replicated.get("templateSpec") or {}
        policy = replicated.get("splitPolicy") or {}
        if isinstance(policy, dict) and policy.get("mode") == "auto":
            # One pool: each cluster's share of it is one child (`-<name>-0` in its cluster).
            replicas = int(replicated.get("replicas", 1))
            specs.append((f"-{name}-0", auto_pool_spec(template, policy, replicas=replicas)))
            continue
        specs.extend((f"-{name}-{i}", template) for i in range(int(replicated.get("replicas", 1))))
    return specs


def auto_pool_spec(
    template: dict[str, Any], policy: dict[str, Any], *, replicas: int = 1
) -> dict[str, Any]:
    """A `splitPolicy: auto` replicated job's template with its one task grown to the pool:
    `accelerators` / the task's accelerators per pod pods (checked at submission,
    jobspec/hyperjob.py), partitions and minimum counted again."""
    spec = copy.deepcopy(template)
    task = (spec.get("tasks") or [{}])[0]
    per_pod = task_gpus(task)  # as the parser counted them (checked at submission)
    if not per_pod:
        return spec
    accelerators = policy.get("accelerators")
    if not isinstance(accelerators, int):  # default: the split as written, as one pool
        accelerators = replicas * int(task.get("replicas", 0)) * per_pod
    pods = accelerators // per_pod
    task["replicas"] = pods
    task.pop("minAvailable", None)
    partition = task.get("partitionPolicy")
    if isinstance(partition, dict) and partition.get("partitionSize"):
        partition["totalPartitions"] = pods // int(partition["partitionSize"])
    spec.pop("minAvailable", None)
    return spec


def name_budget(manifest: dict[str, Any]) -> int:
    """The longest member base name for which every derived name stays within 63 characters:
    `<member>-rdzv`, each child Job, and each pod `<job>-<task>-<n>` for the larger of the
    task's position (what the webhook checks) and its last replica (the pod's hostname)."""
    budget = MAX_NAME - len(RENDEZVOUS_SUFFIX)
    for suffix, spec in volcano_job_specs(manifest):
        budget = min(budget, MAX_NAME - len(suffix))
        for position, task in enumerate(spec.get("tasks") or []):
            last = max(position, int(task.get("replicas", 1)) - 1, 0)
            taken = len(suffix) + len(str(task.get("name", ""))) + len(str(last)) + 2
            budget = min(budget, MAX_NAME - taken)
    return budget


def _dns1035(name: str) -> str:
    """The job's name as the start of a DNS-1035 label: Volcano accepts dots and a leading
    digit (qualified names), a Service name does not."""
    return _NOT_DNS1035.sub("-", name.lower()).lstrip("0123456789-")
