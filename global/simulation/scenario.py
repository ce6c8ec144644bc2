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
      - {name: q1, timeSharing: true, timeSharingQuantum: 1h}   # issue 34
    datasets:                         # where the data is at the start (issue 33)
      - {name: corpus-v3, size: 40Ti, clusters: [west]}
      - {name: code-mix, size: 2Ti, region: us}   # every cluster with region: us
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from volcano_global.clusterspec import layout
from volcano_global.clusterspec.spec import ClusterSpec
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.jobspec.time_sharing import DEFAULT_QUANTUM_S, quantum_seconds


class _Spec(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ClusterEntry(_Spec):
    name: Annotated[str, Field(min_length=1, max_length=63)]
    spec: ClusterSpec | None = None
    lingjun_block: int | None = None
    gpu_model: str = "H800"
    region: str | None = None  # clusters of one region: bytes between them stay in it

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
    # Time-sharing by attained service (`solver.timesharing`), as the Queue's annotations
    # global.volcano.sh/time-sharing and time-sharing-quantum (a Go duration) say it.
    time_sharing: bool = False
    time_sharing_quantum: str | None = None

    @field_validator("time_sharing_quantum")
    @classmethod
    def _quantum(cls, value: str | None) -> str | None:
        if value is not None:
            quantum_seconds(value)
        return value

    @property
    def quantum_s(self) -> float | None:
        """Its quantum in seconds when it time-shares, else None."""
        if not self.time_sharing:
            return None
        if self.time_sharing_quantum is None:
            return DEFAULT_QUANTUM_S
        return quantum_seconds(self.time_sharing_quantum)


class DatasetEntry(_Spec):
    """A dataset and where it is at the start: `clusters`, or every cluster of `region`."""

    name: Annotated[str, Field(min_length=1, max_length=253)]
    size: Annotated[str | int, Field(description="bytes, or a quantity such as 40Ti")]
    clusters: list[str] = Field(default_factory=list)
    region: str | None = None

    @field_validator("size")
    @classmethod
    def _quantity(cls, value: str | int) -> str | int:
        parse_quantity(value)
        return value

    @property
    def size_bytes(self) -> int:
        return int(parse_quantity(self.size))


class Scenario(_Spec):
    clusters: list[ClusterEntry] = Field(min_length=1)
    links: list[LinkEntry] = Field(default_factory=list)
    queues: list[QueueEntry] = Field(default_factory=list)
    datasets: list[DatasetEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known(self) -> Scenario:
        names = [c.name for c in self.clusters]
        if len(set(names)) != len(names):
            raise ValueError("cluster names must be distinct")
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in names:
                    raise ValueError(f"links[{i}]: unknown cluster {end!r}")
        regions = {c.region for c in self.clusters if c.region}
        for i, data in enumerate(self.datasets):
            for name in data.clusters:
                if name not in names:
                    raise ValueError(f"datasets[{i}].clusters: unknown cluster {name!r}")
            if data.region is not None and data.region not in regions:
                raise ValueError(f"datasets[{i}].region: no cluster is in region {data.region!r}")
        return self

    @classmethod
    def load(cls, path: Path) -> Scenario:
        return cls.model_validate(yaml.safe_load(path.read_text()))
