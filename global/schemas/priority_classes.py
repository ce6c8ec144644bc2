"""PriorityClasses, in the `scheduling.k8s.io/v1` shape."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from volcano_global.schemas.common import ApiModel


class PriorityClassMeta(ApiModel):
    name: str


class PriorityClassOut(ApiModel):
    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: PriorityClassMeta
    value: int
    preemption_policy: Literal["PreemptLowerPriority", "Never"]
    global_default: bool = False
    description: str = ""
    built_in: bool = Field(False, description="A system class every cluster has (read only)")


class PriorityClassList(ApiModel):
    items: list[PriorityClassOut]
