"""The YAML spec of a simulated cluster: node groups and topology tiers, or a block of the
real Lingjun fabric."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from volcano_global.jobspec.gpu_models import canonical_model


class _Spec(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class NodeGroup(_Spec):
    count: Annotated[int, Field(ge=1, le=100_000)]
    gpus_per_node: Annotated[int, Field(ge=0, le=64)] = 8
    gpu_model: Annotated[str, AfterValidator(canonical_model)] = "H100"  # GFD names too
    cpu: Annotated[int, Field(ge=1)] = 192
    memory: str = "2Ti"
    name_prefix: str | None = None


class Tier(_Spec):
    name: str
    size: Annotated[
        int,
        Field(
            ge=1,
            description="Members per domain: nodes for tier 1, domains of the tier below above it",
        ),
    ]


class Topology(_Spec):
    tiers: list[Tier] = Field(default_factory=list, max_length=6)


class ClusterSpec(_Spec):
    """A simulated cluster described in YAML: node groups and topology tiers."""

    node_groups: list[NodeGroup] = Field(min_length=1)
    topology: Topology = Field(default_factory=Topology)


class LingjunSpec(_Spec):
    """A spec file naming a block of the real Lingjun fabric instead of node groups."""

    lingjun_block: Annotated[int, Field(ge=0)]
    gpu_model: Annotated[str, AfterValidator(canonical_model)] = "H800"
