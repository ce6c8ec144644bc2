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


class StagingList(ApiModel):
    items: list[StagingOut]


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
