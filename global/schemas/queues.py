"""Queues."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from volcano_global.schemas.common import ApiModel, DNSLabel, RequestBody

# The Queue CRD's bounds: the older shape is checked as the document it becomes, so that an
# error names the field the caller sent (`weight`), not the generated document's.
Weight = Annotated[int, Field(ge=1, le=65535)]
Quota = Annotated[int, Field(ge=0, le=10_000_000, description="GPUs; null means unlimited.")]
# Volcano's Queue CRD: spec.priority >= 0 (the older shape took negative values too).
Priority = Annotated[int, Field(ge=0, le=1_000_000)]


class QueueCreate(RequestBody):
    name: DNSLabel
    weight: Weight = 1
    gpu_quota: Quota | None = None
    priority: Priority = 0

    @field_validator("name")
    @classmethod
    def _not_root(cls, name: str) -> str:
        if name == "root":
            raise ValueError("'root' is Volcano's implicit top of the queue hierarchy")
        return name


class QueuePatch(RequestBody):
    weight: Weight | None = None
    gpu_quota: Quota | None = None
    priority: Priority | None = None
    state: Literal["Open", "Closed"] | None = None


class QueueUsage(ApiModel):
    allocated_gpus: int
    pending_jobs: int
    active_jobs: int
    pending_gpus: int = Field(
        description="GPUs its waiting jobs ask for (a preemptor's nomination counts as "
        "allocated, not here)"
    )


class QueueOut(ApiModel):
    name: str
    weight: int
    gpu_quota: int | None = Field(description="spec.capability's GPUs (all accelerators summed)")
    priority: int
    state: Literal["Open", "Closed"]
    parent: str | None = Field(description="The parent queue; null: a child of the root")
    leaf: bool = Field(description="Whether jobs may be submitted to it (no child queues)")
    reclaimable: bool
    guarantee_gpus: int
    spec: dict[str, Any] = Field(description="The Volcano Queue spec, as applied")
    usage: QueueUsage
    fair_share_gpus: int = Field(
        description="GPUs the queue deserves now (solver/fair_share.py, docs/placement.md): "
        "its parent's share divided by weight among siblings that want GPUs, with guarantee "
        "and deserved as floors and capability as a cap"
    )
    deserved_gpus: int = Field(description="The same as fairShareGpus (Volcano's name)")
    allocated_gpus: int = Field(description="GPUs its subtree's jobs hold")
    share: float | None = Field(
        description="allocated / deserved (Volcano's share); null when it deserves nothing "
        "but holds GPUs"
    )
    created_at: datetime
    updated_at: datetime


class QueueList(ApiModel):
    items: list[QueueOut]
