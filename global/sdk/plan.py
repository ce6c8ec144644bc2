"""Describe a training run as a parallelism plan, check it, and turn it into the Volcano Job
the Global accepts, with the facts the scheduler derives from it.

    plan = ParallelPlan(tensor_parallel=8, pipeline_parallel=4, data_parallel=16,
                        model_parameters=70e9, target_step_time_seconds=12,
                        datasets=[Dataset(name="corpus-v3", size="40Ti", read_gbps=50)],
                        checkpoint_size="2Ti")
    plan.facts().crossing_gbps[2]        # 933.3: what a 2-cluster split must reserve per pair
    doc = job_document(plan, name="llama-70b", image="nvcr.io/nvidia/nemo:25.02")

Rank order (the runtime helper uses the same): tensor parallel innermost, then context, then
pipeline, then data parallel outermost. A data-parallel replica (TP x CP x PP GPUs) is the unit
that stays in one cluster, so only the data-parallel gradient all-reduce crosses clusters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from volcano_global.jobspec import Communication
from volcano_global.jobspec.accelerators import NVIDIA_MODEL_LABEL
from volcano_global.jobspec.extensions import COMMUNICATION, MAX_CLUSTERS, SPLIT
from volcano_global.jobspec.model import CheckpointDeclaration, DatasetDeclaration
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.solver.traffic import allreduce_gbps, pair_demand_gbps

GPU_RESOURCE = "nvidia.com/gpu"


def _bytes(value: str | int | None) -> int | None:
    return None if value is None else math.ceil(parse_quantity(value))


class Dataset(BaseModel):
    """A dataset the run reads: a DataSource's name (docs/data.md), its size (bytes, or a
    quantity such as `40Ti`), and the rate it may read it at remotely instead of staging it
    first (None: it must be in the cluster before the run starts)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    name: str = Field(min_length=1, max_length=253)
    size: str | int | None = None
    read_gbps: float | None = Field(None, gt=0, le=1_000_000)

    @field_validator("size")
    @classmethod
    def _size(cls, value: str | int | None) -> str | int | None:
        _bytes(value)  # ValueError names what is wrong
        return value

    @property
    def size_bytes(self) -> int | None:
        return _bytes(self.size)


class ParallelPlan(BaseModel):
    """A training run's parallelism plan and what its communication costs."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    tensor_parallel: int = Field(1, ge=1, description="TP: inside a pod (one node)")
    pipeline_parallel: int = Field(1, ge=1, description="PP stages")
    data_parallel: int = Field(ge=1, description="DP replicas; only DP may cross clusters")
    context_parallel: int = Field(1, ge=1, description="CP (sequence) groups")
    expert_parallel: int = Field(1, ge=1, description="EP: experts sharded over DP ranks")
    gpus_per_pod: int = Field(8, ge=1, le=64)
    model_parameters: float | None = Field(None, gt=0)
    gradient_bytes_per_parameter: float = Field(2.0, gt=0, description="2: bf16 gradients")
    optimizer_sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] = "none"
    target_step_time_seconds: float | None = Field(None, gt=0)
    tolerated_communication_share: float = Field(
        0.1, gt=0, le=1, description="Share of the step the cross-cluster all-reduce may take"
    )
    replica_in_tier1: bool = Field(
        False,
        description="Keep each data-parallel replica (its pipeline stages) inside one tier-1 "
        "HyperNode (partitionPolicy with a hard tier-1 network topology)",
    )
    datasets: tuple[Dataset, ...] = Field((), description="The datasets the run reads")
    checkpoint_size: str | int | None = Field(
        None, description="The checkpoint's size (bytes or a quantity): what a restore moves"
    )

    @field_validator("checkpoint_size")
    @classmethod
    def _checkpoint(cls, value: str | int | None) -> str | int | None:
        _bytes(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ParallelPlan:
        if self.tensor_parallel > self.gpus_per_pod or self.gpus_per_pod % self.tensor_parallel:
            raise ValueError(
                f"tensorParallel ({self.tensor_parallel}) must divide gpusPerPod "
                f"({self.gpus_per_pod}): a tensor-parallel group stays inside one node"
            )
        if self.unit_gpus % self.gpus_per_pod:
            raise ValueError(
                f"a data-parallel replica (TP x CP x PP = {self.unit_gpus} GPUs) must be whole "
                f"pods of {self.gpus_per_pod} GPUs"
            )
        if self.data_parallel % self.expert_parallel:
            raise ValueError(
                f"expertParallel ({self.expert_parallel}) must divide dataParallel "
                f"({self.data_parallel})"
            )
        return self

    @property
    def unit_gpus(self) -> int:
        return self.tensor_parallel * self.context_parallel * self.pipeline_parallel

    @property
    def world_gpus(self) -> int:
        return self.unit_gpus * self.data_parallel

    def communication(self) -> Communication:
        """The plan as the job API's communication declaration."""
        return Communication(
            tensor_parallel=self.tensor_parallel,
            pipeline_parallel=self.pipeline_parallel,
            data_parallel=self.data_parallel,
            context_parallel=self.context_parallel,
            expert_parallel=self.expert_parallel,
            gpus_per_pod=self.gpus_per_pod,
            model_parameters=self.model_parameters,
            gradient_bytes_per_parameter=self.gradient_bytes_per_parameter,
            optimizer_sharding=self.optimizer_sharding,
            target_step_time_seconds=self.target_step_time_seconds,
            tolerated_communication_share=self.tolerated_communication_share,
            datasets=tuple(
                DatasetDeclaration(name=d.name, size_bytes=d.size_bytes, read_gbps=d.read_gbps)
                for d in self.datasets
            ),
            checkpoint=CheckpointDeclaration(size_bytes=size)
            if (size := _bytes(self.checkpoint_size)) is not None
            else None,
        )

    def declaration(self) -> dict[str, Any]:
        """The communication annotation's content, as a user writes it (sizes as given)."""
        written = self.communication().model_dump(
            by_alias=True, exclude_none=True, exclude={"datasets", "checkpoint"}
        )
        if self.datasets:
            written["datasets"] = [
                {
                    k: v
                    for k, v in (
                        ("name", d.name),
                        ("size", d.size),
                        ("readGbps", d.read_gbps),
                    )
                    if v is not None
                }
                for d in self.datasets
            ]
        if self.checkpoint_size is not None:
            written["checkpoint"] = {"size": self.checkpoint_size}
        return written

    def facts(self, *, max_clusters: int = 4) -> PlanFacts:
        allreduce = allreduce_gbps(self.communication())
        gradient_bytes = (
            self.model_parameters * self.gradient_bytes_per_parameter
            if self.model_parameters
            else None
        )
        return PlanFacts(
            world_gpus=self.world_gpus,
            world_pods=self.world_gpus // self.gpus_per_pod,
            unit_gpus=self.unit_gpus,
            unit_pods=self.unit_gpus // self.gpus_per_pod,
            gradient_bytes=gradient_bytes,
            communication_budget_s=(
                self.tolerated_communication_share * self.target_step_time_seconds
                if self.target_step_time_seconds
                else None
            ),
            allreduce_gbps=allreduce,
            crossing_gbps={
                k: pair_demand_gbps(allreduce, k)
                for k in range(2, min(max_clusters, self.data_parallel) + 1)
            },
            dataset_bytes=sum(d.size_bytes or 0 for d in self.datasets),
            checkpoint_bytes=_bytes(self.checkpoint_size),
        )


@dataclass(frozen=True)
class PlanFacts:
    """What the scheduler derives from a plan."""

    world_gpus: int
    world_pods: int
    unit_gpus: int  # one data-parallel replica: never split across clusters
    unit_pods: int
    gradient_bytes: float | None  # per step, the whole model's gradient
    communication_budget_s: float | None  # tau: the share of the step left for the exchange
    allreduce_gbps: float  # V / tau (0: not declared)
    crossing_gbps: dict[int, float]  # k clusters -> what each pair must reserve per direction
    dataset_bytes: int = 0  # the declared datasets' sizes, summed (those given)
    checkpoint_bytes: int | None = None  # what a restore in another cluster moves


def job_document(
    plan: ParallelPlan,
    *,
    name: str,
    image: str,
    namespace: str = "default",
    command: list[str] | None = None,
    queue: str | None = None,
    priority_class: str | None = None,
    gpu_model: str | None = None,
    max_clusters: int | None = None,
    running_estimate: str | None = None,
    split: bool = True,
) -> dict[str, Any]:
    """The Volcano Job for the plan: one task of `world_pods` pods, each DP replica a partition
    (kept inside a tier-1 HyperNode when asked), the communication declaration in annotations,
    Volcano's `svc` plugin (pod DNS names) and `env` plugin (VC_TASK_INDEX)."""
    facts = plan.facts()
    annotations = {
        COMMUNICATION: yaml.safe_dump(plan.declaration(), sort_keys=False),
        SPLIT: "auto" if split else "never",
    }
    if max_clusters is not None:
        annotations[MAX_CLUSTERS] = str(max_clusters)
    partition: dict[str, Any] = {
        "totalPartitions": plan.data_parallel,
        "partitionSize": facts.unit_pods,
    }
    if plan.replica_in_tier1:
        partition["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    container: dict[str, Any] = {
        "name": "trainer",
        "image": image,
        "resources": {"limits": {GPU_RESOURCE: str(plan.gpus_per_pod)}},
    }
    if command:
        container["command"] = list(command)
    pod_spec: dict[str, Any] = {"containers": [container], "restartPolicy": "OnFailure"}
    if gpu_model:
        pod_spec["nodeSelector"] = {NVIDIA_MODEL_LABEL: gpu_model}
    spec: dict[str, Any] = {
        "minAvailable": facts.world_pods,
        "schedulerName": "volcano",
        "plugins": {"svc": [], "env": []},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "tasks": [
            {
                "name": "worker",
                "replicas": facts.world_pods,
                "partitionPolicy": partition,
                "template": {"spec": pod_spec},
            }
        ],
    }
    if queue:
        spec["queue"] = queue
    if priority_class:
        spec["priorityClassName"] = priority_class
    if running_estimate:
        spec["runningEstimate"] = running_estimate
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
    }


class _BlockDumper(yaml.SafeDumper):
    """A safe dumper that writes a string of several lines as a `|` block, as people write
    the communication annotation (a quoted scalar with `\n` and blank lines otherwise)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def to_yaml(document: dict[str, Any]) -> str:
    """`document` (a `job_document`) as YAML, multi-line annotations as `|` blocks."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False)
