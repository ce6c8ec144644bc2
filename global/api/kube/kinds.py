"""The kinds the Global serves to kubectl. Volcano's printer columns (from its Job CRD) plus
the clusters the job runs in; the Global's additions to `.status` are declared in the schema
so `kubectl explain` shows them."""

from __future__ import annotations

from typing import Any

from volcano_global.api.kube.adapters import JobAdapter
from volcano_global.api.kube.cluster_scoped_adapters import PriorityClassAdapter, QueueAdapter
from volcano_global.api.kube.data_adapters import DataSourceAdapter, DataSourceClaimAdapter
from volcano_global.api.kube.registry import Column, Kind
from volcano_global.api.kube.tables import run_duration


def _clusters(obj: dict[str, Any]) -> str:
    return ",".join(obj.get("status", {}).get("clusters") or []) or "<none>"


_CLUSTERS = Column(
    "CLUSTERS",
    "string",
    value=_clusters,
    description="The member clusters the job runs in, or ran in once finished.",
)
_DURATION = Column(
    "DURATION",
    "string",
    value=run_duration,
    description="How long the run ran: startTime to completionTime, or to now while it runs.",
)
_GLOBAL_STATUS: dict[str, Any] = {
    "globalState": {
        "type": "string",
        "description": "The job's state in the Global: Pending, Placed, Dispatched, Running, "
        "Succeeded, Failed or Cancelled.",
    },
    "queue": {"type": "string", "description": "The Global queue the job waits in."},
    "clusters": {
        "type": "array",
        "items": {"type": "string"},
        "description": "The member clusters the job runs in, or ran in once finished, in "
        "rank order.",
    },
    "startTime": {
        "type": "string",
        "format": "date-time",
        "description": "When the job's run started (its first pods ran).",
    },
    "completionTime": {
        "type": "string",
        "format": "date-time",
        "description": "When the job finished (succeeded, failed or was cancelled).",
    },
    "pendingReason": {
        "type": "string",
        "description": "Why a pending job has not been placed yet.",
    },
}

VOLCANO_JOB = Kind(
    group="batch.volcano.sh",
    version="v1alpha1",
    kind="Job",
    plural="jobs",
    singular="job",
    short_names=("vcjob", "vj"),
    namespaced=True,
    columns=(
        Column("STATUS", "string", ".status.state.phase"),
        Column("minAvailable", "integer", ".status.minAvailable"),
        Column("RUNNINGS", "integer", ".status.running"),
        Column("AGE", "date", ".metadata.creationTimestamp"),
        Column("QUEUE", "string", ".spec.queue", priority=1),
        _CLUSTERS,
        _DURATION,
    ),
    crd_file="batch.volcano.sh_jobs.yaml",
    adapter=JobAdapter("Job", "jobs", "batch.volcano.sh"),
    extra_status=_GLOBAL_STATUS,
)

HYPER_JOB = Kind(
    group="training.volcano.sh",
    version="v1alpha1",
    kind="HyperJob",
    plural="hyperjobs",
    singular="hyperjob",
    short_names=("hyperjob", "hj"),
    namespaced=True,
    # Volcano's HyperJob CRD declares no printer columns: the phase, age, clusters, duration.
    columns=(
        Column("STATUS", "string", ".status.state.phase"),
        Column("AGE", "date", ".metadata.creationTimestamp"),
        Column("QUEUE", "string", ".status.queue", priority=1),
        _CLUSTERS,
        _DURATION,
    ),
    crd_file="training.volcano.sh_hyperjobs.yaml",
    adapter=JobAdapter("HyperJob", "hyperjobs", "training.volcano.sh"),
    extra_status={
        **_GLOBAL_STATUS,
        "state": {
            "type": "object",
            "description": "The job's phase in Volcano's terms, as for a Volcano Job.",
            "properties": {
                "phase": {"type": "string"},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
            },
        },
    },
)


def _parent(obj: dict[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("parent") or "root")  # Volcano's implicit top


def _global_default(obj: dict[str, Any]) -> bool:
    return bool(obj.get("globalDefault", False))


# Volcano's Queue CRD: cluster-scoped, its one printer column (PARENT) with the state and the
# jobs and GPUs Volcano's status counts, which `vcctl queue list` prints.
QUEUE = Kind(
    group="scheduling.volcano.sh",
    version="v1beta1",
    kind="Queue",
    plural="queues",
    singular="queue",
    short_names=("q", "queue-v1beta1"),
    namespaced=False,
    columns=(
        Column("PARENT", "string", value=_parent, description="The parent queue; root if none."),
        Column("STATE", "string", ".status.state"),
        Column("WEIGHT", "integer", ".spec.weight"),
        Column("PENDING", "integer", ".status.pending"),
        Column("RUNNING", "integer", ".status.running"),
        Column("AGE", "date", ".metadata.creationTimestamp"),
    ),
    crd_file="scheduling.volcano.sh_queues.yaml",
    adapter=QueueAdapter(),
    status_verbs=("get", "patch"),
    categories=("volcano",),
    extra_status={
        "deservedGpus": {
            "type": "integer",
            "description": "The GPUs the queue deserves now in the Global's fair share.",
        },
    },
)

# Kubernetes' built-in kind, with the columns `kubectl get pc` prints from a real API server.
PRIORITY_CLASS = Kind(
    group="scheduling.k8s.io",
    version="v1",
    kind="PriorityClass",
    plural="priorityclasses",
    singular="priorityclass",
    short_names=("pc",),
    namespaced=False,
    columns=(
        Column("VALUE", "integer", ".value"),
        Column("GLOBAL-DEFAULT", "boolean", value=_global_default),
        Column("AGE", "date", ".metadata.creationTimestamp"),
        Column("PREEMPTIONPOLICY", "string", ".preemptionPolicy"),
    ),
    crd_file="scheduling.k8s.io_priorityclasses.yaml",
    adapter=PriorityClassAdapter(),
    categories=(),
)


def _locality(obj: dict[str, Any]) -> str:
    clusters = ((obj.get("spec") or {}).get("locality") or {}).get("clusterNames") or []
    return ",".join(clusters) or "<none>"


def _workload(obj: dict[str, Any]) -> str:
    workload = (obj.get("spec") or {}).get("workload") or {}
    return f"{workload.get('kind', '')}/{workload.get('name', '')}"


# Volcano Global's DataDependency kinds (its CRDs declare no printer columns): where the data
# is and how large, and which job each claim is for. Not watched: `get -w` is refused.
_DATA_VERBS = ("create", "delete", "get", "list", "patch")
DATA_SOURCE = Kind(
    group="datadependency.volcano.sh",
    version="v1alpha1",
    kind="DataSource",
    plural="datasources",
    singular="datasource",
    short_names=(),
    namespaced=False,
    columns=(
        Column("SIZE", "string", ".spec.attributes.size"),
        Column("CLUSTERS", "string", value=_locality, description="The clusters that hold it."),
        Column("CLAIMS", "integer", ".status.boundClaims"),
        Column("AGE", "date", ".metadata.creationTimestamp"),
        Column("SYSTEM", "string", ".spec.system", priority=1),
        Column("TYPE", "string", ".spec.type", priority=1),
    ),
    crd_file="datadependency.volcano.sh_datasources.yaml",
    adapter=DataSourceAdapter(),
    verbs=_DATA_VERBS,
    categories=(),
)
DATA_SOURCE_CLAIM = Kind(
    group="datadependency.volcano.sh",
    version="v1alpha1",
    kind="DataSourceClaim",
    plural="datasourceclaims",
    singular="datasourceclaim",
    short_names=(),
    namespaced=True,
    columns=(
        Column("DATASOURCE", "string", ".spec.dataSourceName"),
        Column("WORKLOAD", "string", value=_workload, description="The job that reads it."),
        Column("STATUS", "string", ".status.phase"),
        Column("AGE", "date", ".metadata.creationTimestamp"),
    ),
    crd_file="datadependency.volcano.sh_datasourceclaims.yaml",
    adapter=DataSourceClaimAdapter(),
    verbs=_DATA_VERBS,
    categories=(),
)

KINDS: tuple[Kind, ...] = (
    VOLCANO_JOB,
    HYPER_JOB,
    QUEUE,
    PRIORITY_CLASS,
    DATA_SOURCE,
    DATA_SOURCE_CLAIM,
)
