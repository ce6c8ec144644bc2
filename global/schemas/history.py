"""The federation over time (`GET /api/v1/history`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from volcano_global.schemas.common import ApiModel


class HistoryPointOut(ApiModel):
    at: datetime = Field(description="The bucket's start.")
    gpus_total: float = Field(description="GPUs of every cluster (mean over the bucket).")
    gpus_allocated: float = Field(description="GPUs held by placed and running jobs (mean).")
    waiting_jobs: float = Field(description="Jobs waiting (Pending), mean over the bucket.")
    waiting_gpus: float = Field(description="GPUs the waiting jobs ask for (mean).")
    median_wait_seconds: float = Field(
        description="How long the median waiting job had waited (mean over the bucket)."
    )
    oldest_wait_seconds: float = Field(
        description="How long the oldest waiting job had waited (the bucket's longest)."
    )
    samples: int = Field(description="Samples in the bucket (one every 30 s at most).")


class History(ApiModel):
    since: datetime
    step_seconds: int
    items: list[HistoryPointOut] = Field(description="Buckets with a sample, oldest first.")
