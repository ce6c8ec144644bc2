"""Clusters, their inventory snapshots and topology."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from volcano_global.bounds import CPU_MILLIS, GPUS_PER_POD, MEMORY_BYTES
from volcano_global.db.base import column_length
from volcano_global.db.models import Node
from volcano_global.jobspec.gpu_models import canonical_or_none
from volcano_global.schemas.common import ApiModel, DNSLabel, GpuCapacity, ListMeta, RequestBody

LabelValue = Annotated[str, Field(max_length=63)]


class ClusterCreate(RequestBody):
    name: DNSLabel
    description: str = Field("", max_length=512)
    labels: dict[Annotated[str, Field(max_length=253)], LabelValue] = Field(
        default_factory=dict,
        description="Placement labels, e.g. region, zone, site.",
        max_length=64,
    )


class NodeCounts(ApiModel):
    total: int
    ready: int


class ClusterOut(ApiModel):
    name: str
    description: str
    labels: dict[str, str]
    state: str
    last_heartbeat_at: datetime | None
    inventory_generation: int
    inventory_updated_at: datetime | None
    capacity: list[GpuCapacity]
    nodes: NodeCounts
    created_at: datetime


class AgentEndpoint(ApiModel):
    """Where and how a new cluster's agent reaches the Global."""

    address: str | None = Field(
        description="host:port the agents dial, when the server is told it (settings "
        "`agents.address`); null: the REST API's host with `port`."
    )
    port: int = Field(description="The agent gRPC port the server listens on.")
    tls: bool = Field(description="The agent port speaks TLS (the agent needs --ca-file).")
    client_certificate: bool = Field(
        description="The agent port asks for a client certificate (mutual TLS)."
    )


class ClusterRegistered(ClusterOut):
    agent_token: str = Field(description="Shown once: the agent's bearer token for this cluster.")
    agent_endpoint: AgentEndpoint


class ClusterToken(ApiModel):
    cluster: str
    agent_token: str


class ClusterList(ApiModel):
    items: list[ClusterOut]
    metadata: ListMeta = Field(default_factory=ListMeta)


class DomainIn(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    tier: Annotated[int, Field(ge=1, le=16)]
    tier_name: Annotated[str, Field(max_length=63)] | None = None
    parent: str | None = None


# Kubernetes' bounds: a taint's key is a qualified name (a 253-character prefix, '/', a
# 63-character name), its value a label value. Taints are stored as JSON: no column bounds them.
TAINT_KEY_LENGTH, TAINT_VALUE_LENGTH = 317, 63
# A node's stored strings are as long as their columns take (the one definition of the bound).
NODE_NAME_LENGTH = column_length(Node.name)
GPU_MODEL_LENGTH = column_length(Node.gpu_model)


class Taint(ApiModel):
    key: Annotated[str, Field(max_length=TAINT_KEY_LENGTH)]
    value: Annotated[str, Field(max_length=TAINT_VALUE_LENGTH)] | None = None
    effect: str


class NodeIn(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=NODE_NAME_LENGTH)]
    # GFD's product label and the short name are one model (jobspec.gpu_models): any agent's
    # report is stored under the name jobs are matched by.
    gpu_model: Annotated[
        Annotated[str, Field(max_length=GPU_MODEL_LENGTH)] | None,
        AfterValidator(canonical_or_none),
    ] = None
    gpu_allocatable: Annotated[int, GPUS_PER_POD.field()] = 0
    gpu_used: Annotated[int, GPUS_PER_POD.field()] = 0
    cpu_allocatable_millis: Annotated[int, CPU_MILLIS.field()] = 0
    cpu_used_millis: Annotated[int, CPU_MILLIS.field()] = 0
    memory_allocatable_bytes: Annotated[int, MEMORY_BYTES.field()] = 0
    memory_used_bytes: Annotated[int, MEMORY_BYTES.field()] = 0
    ready: bool = True
    schedulable: bool = True
    domain: str | None = Field(None, description="Name of the tier-1 domain holding the node.")
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)

    @model_validator(mode="after")
    def _used_within_allocatable(self) -> NodeIn:
        if self.gpu_used > self.gpu_allocatable:
            raise ValueError(
                f"gpuUsed ({self.gpu_used}) exceeds gpuAllocatable ({self.gpu_allocatable})"
            )
        return self


class InventorySnapshot(RequestBody):
    """A cluster's whole inventory; it replaces what the Global held for the cluster."""

    domains: list[DomainIn] = Field(default_factory=list, max_length=100_000)
    nodes: list[NodeIn] = Field(default_factory=list, max_length=20_000)

    @model_validator(mode="after")
    def _consistent(self) -> InventorySnapshot:
        tiers: dict[str, int] = {}
        for i, domain in enumerate(self.domains):
            if domain.name in tiers:
                raise ValueError(f"domains[{i}].name: duplicate domain {domain.name!r}")
            tiers[domain.name] = domain.tier
        for i, domain in enumerate(self.domains):
            if domain.parent is None:
                continue
            if domain.parent not in tiers:
                raise ValueError(f"domains[{i}].parent: unknown domain {domain.parent!r}")
            if tiers[domain.parent] <= domain.tier:
                raise ValueError(
                    f"domains[{i}].parent: a parent's tier must be above its child's "
                    f"({domain.parent!r} is tier {tiers[domain.parent]}, {domain.name!r} is "
                    f"tier {domain.tier})"
                )
        names: set[str] = set()
        for i, node in enumerate(self.nodes):
            if node.name in names:
                raise ValueError(f"nodes[{i}].name: duplicate node {node.name!r}")
            names.add(node.name)
            if node.domain is not None and node.domain not in tiers:
                raise ValueError(f"nodes[{i}].domain: unknown domain {node.domain!r}")
        return self


class InventoryAccepted(ApiModel):
    cluster: str
    inventory_generation: int
    nodes: int
    domains: int
    capacity: list[GpuCapacity]


class DomainOut(ApiModel):
    name: str
    tier: int
    tier_name: str | None
    parent: str | None
    capacity: list[GpuCapacity]
    nodes: int
    nodes_not_ready: list[str]
    children: int = Field(0, description="How many domains this one holds (the next tier).")


class Topology(ApiModel):
    cluster: str
    domains: list[DomainOut]


class NodeUsageIn(ApiModel):
    """What a node's pods use, for a node the cluster holds whose usage alone changed. Its
    GPUs used must be within the stored node's allocatable ones (checked when applied)."""

    name: Annotated[str, Field(min_length=1, max_length=NODE_NAME_LENGTH)]
    gpu_used: Annotated[int, GPUS_PER_POD.field()] = 0
    cpu_used_millis: Annotated[int, CPU_MILLIS.field()] = 0
    memory_used_bytes: Annotated[int, MEMORY_BYTES.field()] = 0


class InventoryDelta(RequestBody):
    """Changes to a cluster's inventory: whole nodes added or changed, nodes removed, the
    usage of nodes whose usage alone changed, and HyperNode changes. Applied in one
    transaction."""

    node_upserts: list[NodeIn] = Field(default_factory=list, max_length=20_000)
    node_removals: list[str] = Field(default_factory=list, max_length=20_000)
    node_usages: list[NodeUsageIn] = Field(default_factory=list, max_length=20_000)
    domain_upserts: list[DomainIn] = Field(default_factory=list, max_length=100_000)
    domain_removals: list[str] = Field(default_factory=list, max_length=100_000)

    @model_validator(mode="after")
    def _distinct(self) -> InventoryDelta:
        seen: set[str] = set()
        for i, node in enumerate(self.node_upserts):
            if node.name in seen:
                raise ValueError(f"nodeUpserts[{i}].name: duplicate node {node.name!r}")
            seen.add(node.name)
        for i, name in enumerate(self.node_removals):
            if name in seen:
                raise ValueError(f"nodeRemovals[{i}]: node {name!r} is both changed and removed")
        removed = set(self.node_removals)
        for i, usage in enumerate(self.node_usages):
            if usage.name in seen or usage.name in removed:
                raise ValueError(
                    f"nodeUsages[{i}].name: node {usage.name!r} is named twice in the delta"
                )
            seen.add(usage.name)
        return self
