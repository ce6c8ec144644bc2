"""The normalized form of a submitted job: what the scheduler reads, whatever the input kind."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from volcano_global.jobspec.gpu_models import canonical_or_none

# A GPU model as the Global names it (gpu_models): also what a job stored under GFD's product
# name before the names were mapped reads back as.
Model = Annotated[str | None, AfterValidator(canonical_or_none)]


class Frozen(BaseModel):
    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, populate_by_name=True, extra="forbid"
    )


class PodResources(Frozen):
    """Effective requests of one pod (init containers and sidecars folded in, as the
    kube-scheduler computes them)."""

    gpus: int = 0
    gpu_resource: str | None = None
    cpu_millis: int = 0
    memory_bytes: int = 0


class TopologyRequirement(Frozen):
    """Volcano `networkTopology`: pods must stay within one HyperNode of at most this tier."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int | None = None
    highest_tier_name: str | None = None


class Partition(Frozen):
    """Volcano `partitionPolicy`: the task's pods come in groups that each stay in one domain."""

    total_partitions: int
    partition_size: int
    min_partitions: int = 0
    network_topology: TopologyRequirement | None = None


class TaskGang(Frozen):
    name: str
    replicas: int
    min_available: int
    resources: PodResources
    gpu_model: Model = None
    partition: Partition | None = None
    sub_job: str | None = Field(None, description="HyperJob replicatedJob this task belongs to")


class SubJob(Frozen):
    """A HyperJob replicatedJob: `replicas` Volcano Jobs of `pods` pods each. Each child job
    runs whole in one cluster."""

    name: str
    replicas: int
    pods: int
    gpus: int
    min_available: int
    cluster_names: list[str] = Field(default_factory=list)
    network_topology: TopologyRequirement | None = None
    # `splitPolicy` (jobspec/hyperjob.py): static keeps `replicas` children of `pods` pods as
    # written; auto is one pool of `pods` pods (replicas 1) that the placement splits.
    split_mode: Literal["static", "auto"] = "static"
    accelerators: int | None = None


class Gang(Frozen):
    tasks: list[TaskGang]
    min_available: int
    total_pods: int
    total_gpus: int
    gpu_model: Model = None
    network_topology: TopologyRequirement | None = None
    sub_jobs: list[SubJob] = Field(default_factory=list)
    min_sub_jobs: int | None = None


class DatasetDeclaration(Frozen):
    """A dataset the job reads, as its declaration names it (docs/data.md): `name` is a
    DataSource's name (its locality, and its size when the declaration gives none, come from
    the stored DataSource); `read_gbps`: the job may read it remotely at this rate instead of
    staging it first."""

    name: str
    size_bytes: int | None = None
    read_gbps: float | None = None


class CheckpointDeclaration(Frozen):
    """The job's checkpoint: its size, what a restore elsewhere must move."""

    size_bytes: int


class Communication(Frozen):
    """The training framework's parallelism plan (the communication declaration), with the
    datasets the job reads and its checkpoint."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int
    context_parallel: int = 1
    expert_parallel: int = 1
    gpus_per_pod: int
    model_parameters: float | None = None
    gradient_bytes_per_parameter: float = 2.0
    optimizer_sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] = "none"
    target_step_time_seconds: float | None = None
    tolerated_communication_share: float = 0.1
    # Elastic width: the fewest data-parallel replicas the job may run with (None: all of
    # them, `data_parallel`, which is also the most: the document's replicas).
    min_data_parallel: int | None = None
    datasets: tuple[DatasetDeclaration, ...] = ()
    checkpoint: CheckpointDeclaration | None = None

    @property
    def unit_gpus(self) -> int:
        """GPUs of one data-parallel replica: the part that must stay inside one cluster."""
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel


class SplitPolicy(Frozen):
    """Whether and how the job may be split across clusters. `unit_pods` pods always stay in
    one cluster (for a HyperJob the unit is one child Volcano Job: `unit: subJob`)."""

    mode: Literal["never", "auto"] = "never"
    unit: Literal["pods", "subJob"] = "pods"
    unit_pods: int
    max_clusters: int = 1
    min_share_pods: int = 0
    crossing_gbps: float | None = Field(
        None, description="Declared all-reduce rate V/tau (Gbps); overrides the derived one"
    )
    source: Literal["default", "annotations", "communication", "hyperjob", "plugins"] = "default"
    # Elastic width (`jobspec/elastic.py`): the job may run with as few as `min_units` of its
    # units of `unit_pods` pods (0: all of them, a rigid gang). A job that never splits has the
    # whole job as its unit unless it is elastic: then `unit_pods` is its replica.
    min_units: int = 0


class LifecyclePolicy(Frozen):
    """A job-level Volcano `policies` entry, as far as the Global acts on it: the events it
    matches (`event` and `events` together; `*` matches any) and its action."""

    events: list[str]
    action: str


class Lifecycle(Frozen):
    """What happens to the job once placed, read from its document at submission
    (`jobspec/lifecycle.py`)."""

    running_estimate_seconds: float = Field(
        description="Volcano's runningEstimate (a HyperJob's: its first child's that has one)"
    )
    policies: list[LifecyclePolicy] = Field(description="In order: the first match decides")
    max_retry: int = Field(description="Times the job may be requeued after it started")
    gang_start_timeout_seconds: int | None = Field(
        description="Time every share has to start; None: the scheduler's default"
    )


class NormalizedJob(Frozen):
    api_version: str
    kind: Literal["Job", "HyperJob"]
    name: str
    namespace: str
    queue: str | None
    priority_class_name: str | None
    priority: int
    preemption_policy: str = Field(
        "PreemptLowerPriority",
        description="The class's preemptionPolicy: PreemptLowerPriority or Never",
    )
    gang: Gang
    split_policy: SplitPolicy
    communication: Communication | None = None
    lifecycle: Lifecycle
    preemptable: bool = Field(
        True, description='False: annotated volcano.sh/preemptable: "false" (never evicted)'
    )
