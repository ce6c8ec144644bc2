"""Links between clusters."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from volcano_global.bounds import BANDWIDTH_GBPS
from volcano_global.schemas.common import ApiModel, DNSLabel, RequestBody


class LinkCreate(RequestBody):
    cluster_a: DNSLabel
    cluster_b: DNSLabel
    capacity_gbps: Annotated[
        float, BANDWIDTH_GBPS.field(strict_low=True), Field(description="Per direction.")
    ]
    latency_ms: Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)] = 0.0


class LinkOut(ApiModel):
    cluster_a: str
    cluster_b: str
    capacity_gbps: float
    latency_ms: float
    reserved_gbps: float
    free_gbps: float
    created_at: datetime


class LinkList(ApiModel):
    items: list[LinkOut]
