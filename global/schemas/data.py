"""DataSources and DataSourceClaims as the REST API shows them: what the Global reads of each
(size, locality, binding) beside the object itself (`datadependency.volcano.sh/v1alpha1`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from volcano_global.schemas.common import ApiModel


class DataSourceOut(ApiModel):
    name: str
    system: str
    type: str
    source_name: str = Field(description="spec.name: what claims ask for")
    clusters: list[str] = Field(description="The clusters that hold it now")
    size_bytes: int | None = Field(description="spec.attributes.size in bytes (null: not said)")
    bound_claims: int
    created_at: datetime
    updated_at: datetime
    object: dict[str, Any] = Field(description="The DataSource as kubectl reads it")


class DataSourceList(ApiModel):
    items: list[DataSourceOut]


class WorkloadOut(ApiModel):
    kind: Literal["Job", "HyperJob"]
    name: str


class DataSourceClaimOut(ApiModel):
    namespace: str
    name: str
    data_source_name: str
    workload: WorkloadOut
    read_gbps: float | None = Field(description="May read remotely at this rate (null: stage)")
    bound_data_source: str | None = Field(description="The DataSource it binds (null: none yet)")
    created_at: datetime
    updated_at: datetime
    object: dict[str, Any] = Field(description="The DataSourceClaim as kubectl reads it")


class DataSourceClaimList(ApiModel):
    items: list[DataSourceClaimOut]


class StagingItemOut(ApiModel):
    data_source: str
    bytes: int
    source_cluster: str = Field(description="Where the bytes come from (empty: not said)")
    destination: str = Field(description="Where the share's pods read them in its cluster")
    gbps: float = Field(description="Link bandwidth reserved for the copy (0: none)")


class ShareStagingOut(ApiModel):
    """One share's copies into its cluster."""

    cluster: str = Field(description="The share's cluster: where the data goes")
    phase: str = Field(description="The share's phase (Staging while its data is copied)")
    message: str = Field(description='The agent\'s last word: "staged 1 GiB of 4 GiB (25%)"')
    items: list[StagingItemOut]
    placed_at: datetime = Field(description="When its placement was made")
    reported_at: datetime | None = Field(description="Its agent's last report (null: none)")
    staged_at: datetime | None = Field(description="When the copy ended (null: not yet)")


class StagingOut(ShareStagingOut):
    job_uid: uuid.UUID
    namespace: str
    name: str
    queue: str


class DataCopyOut(ApiModel):
    """A copy that belongs to no share: made while a job waits (purpose `prefetch`), or of a
    popular dataset ahead of demand, for no job (purpose `replica`); run by its destination
    cluster's agent, its bandwidth reserved on the link until it ends."""

    uid: uuid.UUID
    purpose: str = Field(
        description="Why it was made: prefetch (a waiting job's data), replica (a popular dataset "
        "copied ahead of demand, for no job)",
    )
    job_uid: uuid.UUID | None = Field(description="The job it was made for (null: none)")
    namespace: str = Field(description="Where its staging Job runs in the cluster")
    name: str | None = Field(description="Its job's name (null: made for no job)")
    queue: str | None
    data_source: str
    bytes: int
    source_cluster: str
    cluster: str = Field(description="Where the data goes")
    gbps: float = Field(description="Link bandwidth reserved for it while it runs")
    state: Literal["Pending", "Copying", "Succeeded", "Failed", "Stopping", "Stopped"]
    staged_bytes: int = Field(description="Copied so far, as its agent says (0: not said)")
    message: str = Field(description="The agent's last word (progress, or why it failed)")
    reason: str = Field(description="Why it failed or was stopped")
    created_at: datetime
    reported_at: datetime | None
    ended_at: datetime | None


class StagingList(ApiModel):
    items: list[StagingOut]
    copies: list[DataCopyOut] = Field(
        description="The copies that belong to no share running now (prefetch, replica), oldest "
        "first"
    )


class DatasetNeedOut(ApiModel):
    name: str
    size_bytes: int | None = Field(description="null: unknown")
    clusters: list[str] = Field(description="The clusters that hold it now (empty: none known)")
    read_gbps: float | None = Field(description="May read it remotely at this rate (null: stage)")
    source: Literal["claim", "declaration"]
    claim: str | None = Field(description="The DataSourceClaim (namespace/name) that names it")
    bound: bool = Field(description="A DataSource describes it (false: locality unknown)")


class CheckpointNeedOut(ApiModel):
    size_bytes: int | None
    cluster: str | None = Field(description="Where it was written (null: never reported)")


class JobDataOut(ApiModel):
    """A job's data: what it reads and where each dataset is, its checkpoint, and the
    staging of its latest placement's shares."""

    datasets: list[DatasetNeedOut]
    checkpoint: CheckpointNeedOut | None
    staging: list[ShareStagingOut]
    copies: list[DataCopyOut] = Field(
        description="The copies made for it while it waited (prefetch), whatever their state"
    )
