"""The multi-cluster extension fields, carried as annotations so the document stays a valid
Volcano object that `kubectl apply` accepts unchanged:

    global.volcano.sh/split: "auto" | "never"
    global.volcano.sh/max-clusters: "3"
    global.volcano.sh/min-share-pods: "8"
    global.volcano.sh/unit-pods: "4"
    global.volcano.sh/gpu-model: "H100"
    global.volcano.sh/crossing-gbps: "120"    # explicit all-reduce rate V/tau, overrides the plan
    global.volcano.sh/elastic: "true"       # may be resized between minAvailable and replicas
    global.volcano.sh/communication: |      # the parallelism plan, YAML or JSON
      {tensorParallel: 8, pipelineParallel: 4, modelParameters: 70e9,
       datasets: [{name: corpus-v3, size: 40Ti, readGbps: 50}],  # what it reads (docs/data.md)
       checkpoint: {size: 2Ti}}
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from volcano_global.bounds import (
    BANDWIDTH_GBPS,
    BYTES_PER_PARAMETER,
    GPUS_PER_POD,
    MODEL_PARAMETERS,
    PARALLEL_DEGREE,
    STEP_TIME_S,
)
from volcano_global.errors import Invalid, field_error
from volcano_global.jobspec.documents import load_yaml, unstorable_text
from volcano_global.jobspec.fields import INT32_MAX, Checker, child
from volcano_global.jobspec.model import CheckpointDeclaration, Communication, DatasetDeclaration
from volcano_global.jobspec.object_metadata import SUBDOMAIN
from volcano_global.jobspec.quantity import parse_quantity

PREFIX = "global.volcano.sh/"
SPLIT = PREFIX + "split"
MAX_CLUSTERS = PREFIX + "max-clusters"
MIN_SHARE_PODS = PREFIX + "min-share-pods"
UNIT_PODS = PREFIX + "unit-pods"
GPU_MODEL = PREFIX + "gpu-model"
COMMUNICATION = PREFIX + "communication"
CROSSING_GBPS = PREFIX + "crossing-gbps"
GANG_START_TIMEOUT = PREFIX + "gang-start-timeout"  # seconds every share has to start
ELASTIC = PREFIX + "elastic"  # "true": the job may be resized (jobspec/elastic.py)
# Volcano's own: "false" and the job is never evicted (or shrunk) for another; any other value,
# or none, and it may be (Volcano reads it from the job's pods; the Global from the job).
PREEMPTABLE = "volcano.sh/preemptable"
KNOWN = frozenset(
    {
        SPLIT,
        MAX_CLUSTERS,
        MIN_SHARE_PODS,
        UNIT_PODS,
        GPU_MODEL,
        COMMUNICATION,
        CROSSING_GBPS,
        GANG_START_TIMEOUT,
        ELASTIC,
    }
)

ANNOTATIONS_PATH = "metadata.annotations"
PLAN_BYTES, PLAN_NODES, PLAN_DEPTH = 16384, 1000, 8  # the communication annotation's bounds


Degree = Annotated[int, PARALLEL_DEGREE.field()]
Size = Annotated[str, Field(max_length=64)] | int  # bounded by parse_quantity (DATA_BYTES)
MAX_DATASETS = 64


class _DatasetInput(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=253)]
    size: Size | None = None
    read_gbps: Annotated[float, BANDWIDTH_GBPS.field(strict_low=True)] | None = None


class _CheckpointInput(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    size: Size


class _CommunicationInput(BaseModel):
    """What a user may write in the communication annotation (all sizes optional but DP
    can be derived from the world size)."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")

    tensor_parallel: Degree = 1
    pipeline_parallel: Degree = 1
    data_parallel: Degree | None = None
    context_parallel: Degree = 1
    expert_parallel: Degree = 1
    gpus_per_pod: Annotated[int, GPUS_PER_POD.field()] | None = None
    model_parameters: Annotated[float, MODEL_PARAMETERS.field(strict_low=True)] | None = None
    gradient_bytes_per_parameter: Annotated[float, BYTES_PER_PARAMETER.field(strict_low=True)] = 2.0
    optimizer_sharding: str = "none"
    target_step_time_seconds: Annotated[float, STEP_TIME_S.field(strict_low=True)] | None = None
    tolerated_communication_share: Annotated[float, Field(allow_inf_nan=False)] = 0.1
    min_data_parallel: Degree | None = None
    datasets: Annotated[list[_DatasetInput], Field(max_length=MAX_DATASETS)] = []
    checkpoint: _CheckpointInput | None = None


def read_annotations(metadata: dict[str, Any], check: Checker) -> dict[str, str]:
    """The job's annotations; unknown `global.volcano.sh/` keys are refused (likely typos)."""
    raw = check.mapping(metadata, "annotations", "metadata") or {}
    result: dict[str, str] = {}
    for key, value in raw.items():
        path = child(ANNOTATIONS_PATH, str(key))
        if not isinstance(value, str):
            check.fail(path, "must be a string (annotation values are strings; quote numbers)")
            continue
        if str(key).startswith(PREFIX) and key not in KNOWN:
            check.fail(path, f"unknown annotation; known: {', '.join(sorted(KNOWN))}")
        result[str(key)] = value
    return result


def annotation_int(
    annotations: dict[str, str],
    key: str,
    check: Checker,
    *,
    minimum: int,
    maximum: float = INT32_MAX,
) -> int | None:
    value = annotations.get(key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        check.fail(child(ANNOTATIONS_PATH, key), f"must be an integer, got {value!r}")
        return None
    if number < minimum:
        check.fail(child(ANNOTATIONS_PATH, key), f"must be >= {minimum}")
        return None
    if number > maximum:
        check.fail(child(ANNOTATIONS_PATH, key), f"must be <= {maximum:g}")
        return None
    return number


def annotation_flag(annotations: dict[str, str], key: str, check: Checker) -> bool | None:
    """A yes/no annotation: exactly "true" or "false" (as Volcano's own flags), else an
    error naming it; None when absent."""
    value = annotations.get(key)
    if value is None:
        return None
    if value not in ("true", "false"):
        check.fail(child(ANNOTATIONS_PATH, key), f'must be "true" or "false", got {value!r}')
        return None
    return value == "true"


def annotation_gbps(annotations: dict[str, str], check: Checker) -> float | None:
    value = annotations.get(CROSSING_GBPS)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        check.fail(
            child(ANNOTATIONS_PATH, CROSSING_GBPS), f"must be a number of Gbps >= 0, got {value!r}"
        )
        return None
    why = BANDWIDTH_GBPS.check(number)
    if why:
        check.fail(child(ANNOTATIONS_PATH, CROSSING_GBPS), why)
        return None
    return number


def read_communication(
    annotations: dict[str, str],
    check: Checker,
    *,
    world_size: int,
    gpus_per_pod: int | None,
) -> Communication | None:
    """Parse and check the parallelism plan against the job's GPUs (sizes multiply to the
    world size, TP fits in one pod, a DP replica is whole pods or a pod holds whole replicas)."""
    text = annotations.get(COMMUNICATION)
    if text is None:
        return None
    path = child(ANNOTATIONS_PATH, COMMUNICATION)
    plan = _load_plan(text, check, path)
    if plan is None:
        return None
    failed = len(check.errors)
    per_pod = _check_values(plan, check, path, gpus_per_pod)
    if per_pod is None or len(check.errors) > failed:
        return None
    data_parallel = _data_parallel(plan, check, path, world_size)
    if data_parallel is None:
        return None
    _check_shape(plan, check, path, data_parallel=data_parallel, per_pod=per_pod)
    datasets = _datasets(plan.datasets, check, path)
    checkpoint = None
    if plan.checkpoint is not None:
        size = _bytes(plan.checkpoint.size, check, f"{path}.checkpoint.size")
        checkpoint = CheckpointDeclaration(size_bytes=size) if size is not None else None
    if len(check.errors) > failed:
        return None
    return Communication(
        tensor_parallel=plan.tensor_parallel,
        pipeline_parallel=plan.pipeline_parallel,
        data_parallel=data_parallel,
        context_parallel=plan.context_parallel,
        expert_parallel=plan.expert_parallel,
        gpus_per_pod=per_pod,
        model_parameters=plan.model_parameters,
        gradient_bytes_per_parameter=plan.gradient_bytes_per_parameter,
        optimizer_sharding=plan.optimizer_sharding,  # type: ignore[arg-type]
        target_step_time_seconds=plan.target_step_time_seconds,
        tolerated_communication_share=plan.tolerated_communication_share,
        min_data_parallel=plan.min_data_parallel,
        datasets=datasets,
        checkpoint=checkpoint,
    )


def _load_plan(text: str, check: Checker, path: str) -> _CommunicationInput | None:
    """The annotation's YAML as the plan's fields (bounded in size, nodes and depth)."""
    raw: Any = None
    if len(text) <= PLAN_BYTES:
        try:
            raw = load_yaml(text, max_nodes=PLAN_NODES, max_depth=PLAN_DEPTH)
        except Invalid as exc:
            check.fail(path, exc.message)
            return None
        refused = unstorable_text(raw)  # YAML's escapes reach what JSON text could not
        if refused is not None:
            below = refused.field if refused.field.startswith("[") else f".{refused.field}"
            check.fail(path + below if refused.field else path, refused.message)
            return None
    if not isinstance(raw, dict):
        check.fail(path, "must be a mapping such as {tensorParallel: 8, pipelineParallel: 4}")
        return None
    try:
        return _CommunicationInput.model_validate(raw)
    except ValidationError as exc:
        check.errors += [field_error(e["loc"], e["msg"], prefix=path) for e in exc.errors()]
        return None


def _check_values(
    plan: _CommunicationInput, check: Checker, path: str, gpus_per_pod: int | None
) -> int | None:
    """Each field in its range; returns the GPUs per pod (the plan's, else the job's)."""
    for name in ("tensorParallel", "pipelineParallel", "contextParallel", "expertParallel"):
        if getattr(plan, _snake(name)) < 1:
            check.fail(f"{path}.{name}", "must be >= 1")
    if plan.optimizer_sharding not in ("none", "zero1", "zero2", "zero3", "fsdp"):
        check.fail(f"{path}.optimizerSharding", "must be one of none, zero1, zero2, zero3, fsdp")
    for name in ("modelParameters", "targetStepTimeSeconds", "gradientBytesPerParameter"):
        value = getattr(plan, _snake(name))
        if value is not None and value <= 0:
            check.fail(f"{path}.{name}", "must be > 0")
    if not 0 < plan.tolerated_communication_share <= 1:
        check.fail(f"{path}.toleratedCommunicationShare", "must be in (0, 1]")
    per_pod = plan.gpus_per_pod or gpus_per_pod
    if per_pod is None or per_pod < 1:
        check.fail(f"{path}.gpusPerPod", "required: the job's GPU pods differ in GPUs per pod")
        return None
    return per_pod


def _data_parallel(
    plan: _CommunicationInput, check: Checker, path: str, world_size: int
) -> int | None:
    """The plan's DP degree, or the world size over TP x PP x CP when it gives none."""
    model_parallel = plan.tensor_parallel * plan.pipeline_parallel * plan.context_parallel
    data_parallel = plan.data_parallel
    if data_parallel is None:
        if world_size % model_parallel:
            check.fail(
                path,
                f"TP x PP x CP = {model_parallel} does not divide the job's {world_size} GPUs",
            )
            return None
        data_parallel = world_size // model_parallel
    if model_parallel * data_parallel != world_size:
        check.fail(
            path,
            f"TP x PP x CP x DP = {model_parallel * data_parallel} must equal the job's "
            f"{world_size} GPUs",
        )
    return data_parallel


def _check_shape(
    plan: _CommunicationInput, check: Checker, path: str, *, data_parallel: int, per_pod: int
) -> None:
    """The degrees fit the pods: TP inside a pod, a replica whole pods or a pod whole
    replicas, EP dividing DP, the elastic minimum within DP."""
    model_parallel = plan.tensor_parallel * plan.pipeline_parallel * plan.context_parallel
    if plan.min_data_parallel is not None and not 1 <= plan.min_data_parallel <= data_parallel:
        check.fail(f"{path}.minDataParallel", f"must be from 1 to dataParallel ({data_parallel})")
    if data_parallel < 1:
        check.fail(f"{path}.dataParallel", "must be >= 1")
    elif data_parallel % plan.expert_parallel:
        check.fail(f"{path}.expertParallel", f"must divide dataParallel ({data_parallel})")
    if plan.tensor_parallel > per_pod or per_pod % plan.tensor_parallel:
        check.fail(
            f"{path}.tensorParallel",
            f"must divide the GPUs of one pod ({per_pod}): tensor parallelism stays in a node",
        )
    if model_parallel % per_pod and per_pod % model_parallel:
        check.fail(
            path,
            f"a data-parallel replica ({model_parallel} GPUs) must be whole pods of {per_pod} "
            "GPUs, or a pod must hold whole replicas",
        )


def _datasets(
    given: list[_DatasetInput], check: Checker, path: str
) -> tuple[DatasetDeclaration, ...]:
    """The datasets the plan declares: each a DataSource's name (a DNS subdomain), once."""
    found: list[DatasetDeclaration] = []
    for index, dataset in enumerate(given):
        where = f"{path}.datasets[{index}]"
        if not SUBDOMAIN.fullmatch(dataset.name):
            check.fail(f"{where}.name", f"{dataset.name!r} is not a DataSource name")
            continue
        if any(d.name == dataset.name for d in found):
            check.fail(f"{where}.name", f"{dataset.name!r} is declared twice")
            continue
        size = None if dataset.size is None else _bytes(dataset.size, check, f"{where}.size")
        found.append(
            DatasetDeclaration(name=dataset.name, size_bytes=size, read_gbps=dataset.read_gbps)
        )
    return tuple(found)


def _bytes(value: str | int, check: Checker, path: str) -> int | None:
    """A size in bytes from a quantity (`40Ti`) or a number of bytes, rounded up."""
    try:
        return math.ceil(parse_quantity(value))
    except ValueError as exc:
        check.fail(path, f"{exc} (a size in bytes, or a quantity such as 40Ti)")
        return None


def _snake(camel: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in camel)
