"""Queues."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from volcano_global.schemas.common import ApiModel, DNSLabel, RequestBody

Weight = Annotated[int, Field(ge=1, le=1_000_000)]
Quota = Annotated[int, Field(ge=0, le=10_000_000, description="GPUs; null means unlimited.")]
Priority = Annotated[int, Field(ge=-1_000_000, le=1_000_000)]


class QueueCreate(RequestBody):
    name: DNSLabel
    weight: Weight = 1
    gpu_quota: Quota | None = None
    priority: Priority = 0


class QueuePatch(RequestBody):
    weight: Weight | None = None
    gpu_quota: Quota | None = None
    priority: Priority | None = None


class QueueUsage(ApiModel):
    allocated_gpus: int
    pending_jobs: int
    active_jobs: int
    pending_gpus: int


class QueueOut(ApiModel):
    name: str
    weight: int
    gpu_quota: int | None
    priority: int
    usage: QueueUsage
    fair_share_gpus: int = Field(
        description="GPUs the queue deserves now: the Ready clusters' GPUs divided by weight "
        "among queues that want GPUs, capped by what it wants and its quota (Volcano proportion)"
    )
    created_at: datetime
    updated_at: datetime


class QueueList(ApiModel):
    items: list[QueueOut]
