"""Jobs, their placements and events."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from volcano_global.bounds import BYTES_PER_STEP, DATA_BYTES, STEP_TIME_S, TRAINING_STEP
from volcano_global.jobspec import Communication, Gang, SplitPolicy
from volcano_global.schemas.common import ApiModel, ListMeta, RequestBody


class ShareOut(ApiModel):
    cluster: str
    pods: int
    gpus: int
    units: int
    rank_offset: int
    domains: dict[str, Any]
    phase: str = Field(
        description="What the cluster's agent last reported: Assigned (nothing yet), Staging "
        "(its data being copied into the cluster), Accepted, Running, Succeeded, Failed, "
        "Cancelled."
    )
    message: str
    gpu_model: str | None = Field(
        None,
        description="The GPU model its pods run on: the job's, its HyperJob children's where "
        "they differ, or for a job that names none the model the round packed it on (null for "
        "such a share placed before the Global recorded it).",
    )


class LinkReservationOut(ApiModel):
    cluster_a: str
    cluster_b: str
    gbps: float
    staging: bool = Field(
        False,
        description="Held for a share's data being copied in: returned when its staging "
        "ends (else held as long as the placement).",
    )


class PlacementOut(ApiModel):
    uid: uuid.UUID
    generation: int
    state: str
    created_at: datetime
    shares: list[ShareOut]
    link_reservations: list[LinkReservationOut]


class JobTimestamps(ApiModel):
    submitted_at: datetime
    placed_at: datetime | None
    dispatched_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime | None = Field(
        None, description="Last change of anything the job shows (a watch's cursor)"
    )


class JobSummary(ApiModel):
    uid: uuid.UUID
    name: str
    namespace: str
    kind: str
    queue: str
    priority: int
    priority_class_name: str | None
    preemption_policy: str = Field(
        "PreemptLowerPriority",
        description="Its priority class's preemptionPolicy when submitted (PreemptLowerPriority "
        "or Never)",
    )
    state: str
    state_message: str
    pending_reason: str | None
    requeues: int = Field(description="Times the job was requeued after it had started.")
    total_pods: int
    total_gpus: int
    gpu_model: str | None
    clusters: list[str] = Field(description="Clusters holding a share of the active placement.")
    timestamps: JobTimestamps


class MeasurementIn(RequestBody):
    """One report from a job's training processes (the SDK's Runtime.report)."""

    step_time_seconds: Annotated[
        float, STEP_TIME_S.field(strict_low=True), Field(description="Measured time of one step.")
    ]
    bytes_per_step: Annotated[
        float,
        BYTES_PER_STEP.field(),
        Field(
            description="Bytes one data-parallel replica exchanged in the gradient all-reduce "
            "in that step (as the framework counts them)."
        ),
    ]


class CheckpointIn(RequestBody):
    """A training process saved a checkpoint (the SDK's Runtime.checkpointed); where it was
    written and its size let placement prefer the cluster that holds it (docs/data.md)."""

    step: Annotated[
        int, TRAINING_STEP.field(), Field(description="The training step the checkpoint holds.")
    ]
    size_bytes: Annotated[int, Field(ge=0, le=int(DATA_BYTES.high))] | None = Field(
        None, description="The checkpoint's size: what a restore in another cluster moves."
    )
    cluster: Annotated[str, Field(min_length=1, max_length=63)] | None = Field(
        None, description="The cluster it was written in."
    )
    cluster_index: Annotated[int, Field(ge=0, le=1024)] | None = Field(
        None,
        description="Or the share that wrote it (its VGLOBAL_CLUSTER_INDEX); with neither, "
        "the job's cluster when it runs in one.",
    )


class Checkpoint(ApiModel):
    step: int = Field(description="The training step of the newest checkpoint reported")
    checkpointed_at: datetime = Field(description="When the Global received the report")
    size_bytes: int | None = Field(None, description="Its size, if reported")
    cluster: str | None = Field(None, description="The cluster it was written in, if known")


class Measurements(ApiModel):
    step_time_seconds: float
    bytes_per_step: float
    samples: int
    allreduce_gbps: float = Field(
        description="V/tau from the measurements; replaces the declared one for later placements"
    )
    updated_at: datetime


class JobDetail(JobSummary):
    gang: Gang
    split_policy: SplitPolicy
    communication: Communication | None
    measurements: Measurements | None = Field(
        description="What the job's processes reported (null: nothing yet)."
    )
    checkpoint: Checkpoint | None = Field(
        None, description="The newest checkpoint its processes reported (null: none)."
    )
    placement: PlacementOut | None = Field(
        description="The active placement, else the most recent one (state Withdrawn or "
        "Released: where the job ran or was to run); null if never placed."
    )
    manifest: dict[str, Any]


class JobList(ApiModel):
    items: list[JobSummary]
    metadata: ListMeta


class EventOut(ApiModel):
    type: str
    reason: str
    message: str
    count: int
    first_seen_at: datetime
    last_seen_at: datetime


class EventList(ApiModel):
    items: list[EventOut]


class PreviewShare(ApiModel):
    cluster: str
    pods: int
    gpus: int
    domains: dict[str, int]


class JobPreview(ApiModel):
    """Where the job would run if it were first in line now (nothing is stored)."""

    name: str
    namespace: str
    queue: str
    total_pods: int
    total_gpus: int
    gpu_model: str | None
    split_policy: SplitPolicy
    communication: Communication | None
    admitted: bool = Field(description="It would start now, ahead of every pending job.")
    shares: list[PreviewShare]
    link_reservations: list[LinkReservationOut]
    reason: str | None = Field(description="Why it could not start now, in numbers.")
