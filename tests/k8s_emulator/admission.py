"""What a real API server with Volcano installed refuses, or changes, when an object is created
or replaced over HTTP (objects tests put in directly are not checked):

- object names as kube-apiserver validates them: a Service's is a DNS-1035 label, a
  Namespace's a DNS-1123 label, other kinds' (custom resources included) a DNS-1123
  subdomain; 422 `Invalid` naming `metadata.name`;
- Volcano Jobs pruned and validated against Volcano's published CRD schema (`schema.py`);
- then Volcano's validating webhook (`validatejob.volcano.sh`, written anew from Volcano
  ed72c7c `pkg/webhooks/admission/jobs/validate/admit_job.go`): the `mpi` plugin's master
  task present, the Job's name and each pod
  name `<job>-<task>-<task position>` qualified names (63 characters), at least one task,
  unique task names, task `minAvailable` <= replicas, the Job's `minAvailable` <= all
  replicas, partition policies of whole partitions, and `dependsOn` forming a DAG of the
  Job's own tasks. A denial is a 400 "admission webhook
  ... denied the request", as the API server reports a webhook's answer without a code.

Not emulated: the webhook's queue lookup, other plugin checks, policy checks, the pod template's full
validation, the mutating webhook's defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tests.k8s_emulator import schema

GVR = tuple[str, str, str]
VOLCANO_JOBS: GVR = ("batch.volcano.sh", "v1alpha1", "jobs")
SERVICES: GVR = ("", "v1", "services")
NAMESPACES: GVR = ("", "v1", "namespaces")
VOLCANO_QUEUES: GVR = ("scheduling.volcano.sh", "v1beta1", "queues")
SCHEMAS = {
    VOLCANO_JOBS: ("batch.volcano.sh_jobs.yaml", "v1alpha1"),
    VOLCANO_QUEUES: ("scheduling.volcano.sh_queues.yaml", "v1beta1"),
}

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(rf"{_LABEL.pattern}(\.{_LABEL.pattern})*")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
_QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character"
)


@dataclass
class Refused(Exception):
    code: int
    reason: str
    message: str


@dataclass
class Admitted:
    obj: dict[str, Any]
    warnings: list[str]  # `Warning` headers: the fields pruned


def admit(gvr: GVR, kind: str, obj: dict[str, Any], *, strict: bool) -> Admitted:
    """The object as the API server stores it, or Refused. `strict`: the request's
    `fieldValidation=Strict` (unknown fields refused instead of pruned with a warning)."""
    kind = f"{kind}.{gvr[0]}" if gvr[0] else kind  # as errors name it: Job.batch.volcano.sh
    name = str((obj.get("metadata") or {}).get("name", ""))
    problems = name_problems(gvr, name)
    if problems:
        raise _invalid(
            kind, name, [f'metadata.name: Invalid value: "{name}": {p}' for p in problems]
        )
    warnings: list[str] = []
    if gvr in SCHEMAS:
        checked = schema.check(obj, schema.crd_schema(*SCHEMAS[gvr]))
        if strict and checked.unknown:
            checked.errors += [f'unknown field "{path}"' for path in checked.unknown]
        if checked.errors:
            raise _invalid(kind, name, checked.errors)
        obj, warnings = checked.obj, [f'unknown field "{p}"' for p in checked.unknown]
    if gvr == VOLCANO_JOBS:
        denied = volcano_job_denials(obj)
        if denied:
            raise Refused(
                400,
                "BadRequest",
                'admission webhook "validatejob.volcano.sh" denied the request: '
                + " ".join(denied),
            )
    return Admitted(obj, warnings)


def name_problems(gvr: GVR, name: str) -> list[str]:
    if gvr == SERVICES:
        return _label_problems(name, _DNS1035, _DNS1035_MSG)
    if gvr == NAMESPACES:
        return _label_problems(name, _LABEL, _LABEL_MSG)
    problems = [] if _SUBDOMAIN.fullmatch(name) else [_SUBDOMAIN_MSG]
    if len(name) > 253:
        problems.append("must be no more than 253 characters")
    return problems


def is_qualified_name(name: str) -> list[str]:
    """Kubernetes' IsQualifiedName for a name without a prefix, as Volcano's webhook uses it
    for Job and pod names."""
    problems = []
    if not name:
        return ["name part must be non-empty"]
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED.fullmatch(name):
        problems.append(_QUALIFIED_MSG)
    return problems


def volcano_job_denials(job: dict[str, Any]) -> list[str]:
    name = str(job["metadata"].get("name", ""))
    spec = job.get("spec") or {}
    tasks = spec.get("tasks") or []
    if not tasks:
        return ["No task specified in job spec"]
    mpi = (spec.get("plugins") or {}).get("mpi")
    if mpi is not None and _mpi_master(mpi) not in {t.get("name") for t in tasks}:
        return ["The specified mpi master task was not found"]
    denied: list[str] = []
    seen: set[str] = set()
    for position, task in enumerate(tasks):
        task_name = str(task.get("name", ""))
        replicas = int(task.get("replicas", 0))
        if task.get("minAvailable") is not None and int(task["minAvailable"]) > replicas:
            denied.append(
                f"'minAvailable' is greater than 'replicas' in task: {task_name}, job: {name};"
            )
        if task_name in seen:
            denied.append(f"duplicated task name {task_name};")
            break
        seen.add(task_name)
        pod = f"{name}-{task_name}-{position}"  # Volcano checks the position, not each replica
        if problems := is_qualified_name(pod):
            denied.append(f"create pod with name {pod} validate failed {problems};")
        denied += _partition_denials(task, name)
    if problems := is_qualified_name(name):
        denied.append(f"create job with name {name} validate failed {problems}")
    if sum(int(t.get("replicas", 0)) for t in tasks) < int(spec.get("minAvailable") or 0):
        denied.append("job 'minAvailable' should not be greater than total replicas in tasks;")
    if not _is_dag(tasks):
        denied.append(
            "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"
        )
    return denied


def _mpi_master(arguments: list[str]) -> str:
    """The `mpi` plugin's master task (Go flag syntax: `--master=x`, `-master x`; default
    "master")."""
    for i, argument in enumerate(arguments):
        flag, _, value = argument.lstrip("-").partition("=")
        if argument.startswith("-") and flag == "master":
            return value or (arguments[i + 1] if i + 1 < len(arguments) else "")
    return "master"


def _is_dag(tasks: list[dict[str, Any]]) -> bool:
    """Volcano's topological sort of `dependsOn`: a task that depends on a name no task has,
    or on a cycle, is never reached."""
    waits = {str(t.get("name")): set((t.get("dependsOn") or {}).get("name") or []) for t in tasks}
    done: set[str] = set()
    while ready := [t for t, deps in waits.items() if t not in done and deps <= done]:
        done.update(ready)
    return len(done) == len(waits)


def _partition_denials(task: dict[str, Any], job: str) -> list[str]:
    partition = task.get("partitionPolicy")
    if not isinstance(partition, dict):
        return []
    where = f"in task: {task.get('name')}, job: {job}"
    total = int(partition.get("totalPartitions") or 0)
    size = int(partition.get("partitionSize") or 0)
    minimum = int(partition.get("minPartitions") or 0)
    if total <= 0:
        return [f"'TotalPartitions' must be greater than 0 {where}"]
    if size <= 0:
        return [f"'PartitionSize' must be greater than 0 {where}"]
    if int(task.get("replicas", 0)) != total * size:
        return [f"'Replicas' are not equal to TotalPartitions*PartitionSize {where}"]
    available = task.get("minAvailable")
    if available is not None and minimum > 0 and minimum * size != int(available):
        return [f"'MinAvailable' is not equal to MinPartitions*PartitionSize {where}"]
    return []


def _label_problems(name: str, pattern: re.Pattern[str], message: str) -> list[str]:
    problems = [] if pattern.fullmatch(name) else [message]
    if len(name) > 63:
        problems.append("must be no more than 63 characters")
    return problems


def _invalid(kind: str, name: str, causes: list[str]) -> Refused:
    listed = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
    return Refused(422, "Invalid", f'{kind} "{name}" is invalid: {listed}')


def warning_headers(admitted: Admitted) -> list[tuple[str, str]]:
    """RFC 7234 warnings, as the API server sends them for pruned fields."""
    return [("Warning", '299 - "' + w.replace('"', '\\"') + '"') for w in admitted.warnings]
