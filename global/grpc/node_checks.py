"""Protocol nodes checked straight into `NodeValues` (usages into `NodeUsage`), without a
pydantic model per node.

Conservative: `checked_nodes` accepts only nodes that `NodeIn` certainly accepts, as `NodeIn`
would store them (`checked_usages`: usages `NodeUsageIn` accepts), and answers None at the
first one it does not clear. The caller then
validates the message with the schemas, which name the field at fault (or accept a node that
was only unusual). So an error reads the same either way, and the schema stays the one
definition of a valid node (tests/global/grpc/test_node_checks.py holds the two together)."""

from __future__ import annotations

from collections.abc import Collection

from volcano_global.bounds import CPU_MILLIS, GPUS_PER_POD, MEMORY_BYTES
from volcano_global.jobspec.gpu_models import canonical_model
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.schemas import clusters
from volcano_global.schemas.clusters import InventorySnapshot
from volcano_global.services.inventory.node_values import NodeUsage, NodeValues

# The schema's bounds, which take the Node table's column lengths (so none can drift).
_NAME, _GPU_MODEL = clusters.NODE_NAME_LENGTH, clusters.GPU_MODEL_LENGTH
_TAINT_KEY, _TAINT_VALUE = clusters.TAINT_KEY_LENGTH, clusters.TAINT_VALUE_LENGTH
_GPUS, _CPU, _MEMORY = int(GPUS_PER_POD.high), int(CPU_MILLIS.high), int(MEMORY_BYTES.high)
# Most nodes in one message (a delta's upserts have the same bound as a snapshot's nodes).
_NODES = next(m.max_length for m in InventorySnapshot.model_fields["nodes"].metadata)
_models: dict[str, str] = {}  # a GPU model as reported -> its canonical name (few distinct)


def checked_nodes(nodes: Collection[pb.Node]) -> list[NodeValues] | None:
    """The nodes as `NodeIn` stores them (names distinct), or None if any is not plainly
    valid or there are too many (the schemas then say why)."""
    if len(nodes) > _NODES:
        return None
    out = []
    names = set()
    for node in nodes:
        values = _checked(node)
        if values is None or values.name in names:
            return None
        names.add(values.name)
        out.append(values)
    return out


def checked_usages(usages: Collection[pb.NodeUsage]) -> list[NodeUsage] | None:
    """The usages as `NodeUsageIn` takes them (names distinct), or None as `checked_nodes`."""
    if len(usages) > _NODES:
        return None
    out = []
    names = set()
    for usage in usages:
        name, cpu, memory = usage.name, usage.cpu_used_millis, usage.memory_used_bytes
        gpus = usage.gpu_used
        if not (
            0 < len(name) <= _NAME
            and gpus <= _GPUS
            and cpu <= _CPU
            and memory <= _MEMORY
            and "\x00" not in name
            and name not in names
        ):
            return None
        names.add(name)
        out.append(NodeUsage(name, gpus, cpu, memory))
    return out


def _checked(node: pb.Node) -> NodeValues | None:
    name, model, domain = node.name, node.gpu_model, node.domain
    gpus, used = node.gpu_allocatable, node.gpu_used
    cpu, cpu_used = node.cpu_allocatable_millis, node.cpu_used_millis
    memory, memory_used = node.memory_allocatable_bytes, node.memory_used_bytes
    if not (
        0 < len(name) <= _NAME
        and len(model) <= _GPU_MODEL
        and used <= gpus <= _GPUS  # unsigned in the protocol: never below 0
        and cpu <= _CPU
        and cpu_used <= _CPU
        and memory <= _MEMORY
        and memory_used <= _MEMORY
        and "\x00" not in name
        and "\x00" not in model
        and "\x00" not in domain
    ):
        return None
    reported = node.labels
    # (iterating the protocol's map itself: `dict(map)` goes through a Python KeysView)
    labels = {k: reported[k] for k in reported} if len(reported) else {}
    if labels and any("\x00" in k or "\x00" in v for k, v in labels.items()):
        return None
    taints = []
    for taint in node.taints if len(node.taints) else ():
        key, value, effect = taint.key, taint.value, taint.effect
        if len(key) > _TAINT_KEY or len(value) > _TAINT_VALUE or "\x00" in key + value + effect:
            return None
        taints.append({"key": key, "value": value or None, "effect": effect})
    return NodeValues(
        name,
        _canonical(model) if model else None,
        gpus,
        used,
        cpu,
        cpu_used,
        memory,
        memory_used,
        node.ready,
        node.schedulable,
        domain or None,
        labels,
        taints,
    )


def _canonical(model: str) -> str:
    canonical = _models.get(model)
    if canonical is None:
        canonical = canonical_model(model)
        if len(_models) < 1024:  # bounded: an agent chooses what it reports
            _models[model] = canonical
    return canonical
