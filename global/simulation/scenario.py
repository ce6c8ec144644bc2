"""What the simulator replays against: clusters (the simulated-cluster specs the agent uses,
`clusterspec/`, or a block of the real Lingjun fabric), links between them, queues.

    clusters:
      - {name: east, lingjunBlock: 2, gpuModel: H100}
      - {name: west, spec: {nodeGroups: [{count: 128, gpusPerNode: 8, gpuModel: H100}],
                            topology: {tiers: [{name: tor, size: 8}]}}}
    links:
      - {a: east, b: west, gbps: 400}
    queues:
      - {name: q0, weight: 2, quota: 2048}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from volcano_global.clusterspec import layout
from volcano_global.clusterspec.spec import ClusterSpec


class _Spec(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ClusterEntry(_Spec):
    name: Annotated[str, Field(min_length=1, max_length=63)]
    spec: ClusterSpec | None = None
    lingjun_block: int | None = None
    gpu_model: str = "H800"

    @model_validator(mode="after")
    def _one_source(self) -> ClusterEntry:
        if (self.spec is None) == (self.lingjun_block is None):
            raise ValueError(f"cluster {self.name}: give exactly one of spec or lingjunBlock")
        return self

    def build(self) -> layout.ClusterLayout:
        """The cluster's nodes and domains, as the agent's simulated cluster lays them out."""
        if self.spec is not None:
            return layout.from_spec(self.name, self.spec)
        return layout.from_lingjun(
            self.name, block=self.lingjun_block or 0, gpu_model=self.gpu_model
        )


class LinkEntry(_Spec):
    a: str
    b: str
    gbps: Annotated[float, Field(gt=0)]


class QueueEntry(_Spec):
    """A queue as the server holds it (a Volcano Queue): `quota` is its GPU capability, which
    caps its subtree; `parent` another queue's name (jobs go to leaves)."""

    name: str
    weight: Annotated[int, Field(ge=1)] = 1
    quota: Annotated[int, Field(ge=0)] | None = None
    parent: str | None = None
    deserved: Annotated[int, Field(ge=0)] | None = None
    guarantee: Annotated[int, Field(ge=0)] = 0
    reclaimable: bool = True  # others below their deserved share may evict its jobs


class Scenario(_Spec):
    clusters: list[ClusterEntry] = Field(min_length=1)
    links: list[LinkEntry] = Field(default_factory=list)
    queues: list[QueueEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known(self) -> Scenario:
        names = [c.name for c in self.clusters]
        if len(set(names)) != len(names):
            raise ValueError("cluster names must be distinct")
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in names:
                    raise ValueError(f"links[{i}]: unknown cluster {end!r}")
        return self

    @classmethod
    def load(cls, path: Path) -> Scenario:
        return cls.model_validate(yaml.safe_load(path.read_text()))
