"""DataSources and DataSourceClaims as the REST API shows them: what the Global reads of each
(size, locality, binding) beside the object itself (`datadependency.volcano.sh/v1alpha1`)."""

from __future__ import annotations

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
