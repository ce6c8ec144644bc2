"""A team's own job history as a trace (`vglobal simulate --trace csv:FILE` or `jsonl:FILE`): one
job per row, the columns as documented in docs/simulation.md ("Your own trace"). Every error
names the file, the line and the column."""

from __future__ import annotations

import csv
import difflib
import json
import math
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from volcano_global.bounds import GPUS_PER_POD
from volcano_global.errors import FieldError, field_error
from volcano_global.jobspec import Communication
from volcano_global.jobspec.durations import GO_DURATION, go_duration_seconds
from volcano_global.jobspec.gpu_models import canonical_or_none
from volcano_global.jobspec.priority_classes import BUILT_IN
from volcano_global.jobspec.quantity import parse_quantity
from volcano_global.settings import SchedulingDefaults
from volcano_global.simulation.workload import DatasetRef, TraceJob
from volcano_global.solver import MAX_PODS
from volcano_global.solver.traffic import allreduce_gbps

_SHARDING = ("none", "zero1", "zero2", "zero3", "fsdp")
MAX_SHOWN = 20  # errors listed; a month of history with one bad column would list every row

# What a cell must hold, column by column: the "type" of the documented table and the start of
# every message about a cell that does not.
EXPECTED = {
    "id": "a string",
    "arrival": "seconds >= 0 or an ISO-8601 time with a zone",
    "pods": f"an integer from 1 to {MAX_PODS:,}",
    "gpusPerPod": f"an integer from 0 to {GPUS_PER_POD.high:g}",
    "gpuModel": "a string",
    "duration": "seconds > 0",
    "steps": "a number > 0",
    "stepsPerSecond": "a number > 0",
    "runningEstimate": "seconds > 0 or a Go duration such as 1h30m",
    "queue": "a string",
    "priority": "an integer",
    "priorityClass": "a priority class name",
    "tensorParallel": "an integer >= 1",
    "pipelineParallel": "an integer >= 1",
    "dataParallel": "an integer >= 1",
    "modelParameters": "a number > 0",
    "stepTime": "seconds > 0",
    "toleratedShare": "a number in (0, 1]",
    "optimizerSharding": "one of " + ", ".join(_SHARDING),
    "maySplit": "true, false, 1, 0, yes or no",
    "maxClusters": "an integer >= 1",
    "unitPods": "an integer >= 1",
    "unitTier": "an integer >= 1",
    "minUnits": "an integer >= 1",
    "dataset": "a dataset name",
    "datasetSize": "bytes or a quantity such as 40Ti",
    "datasetClusters": "cluster names separated by spaces or semicolons",
    "datasetRegion": "a region name",
    "checkpointSize": "bytes or a quantity such as 2Ti",
}


class TraceRow(BaseModel):
    """One row as written (camelCase columns); None where a cell is empty."""

    model_config = ConfigDict(
        alias_generator=to_camel, extra="forbid", allow_inf_nan=False, coerce_numbers_to_str=True
    )

    id: str | None = None
    arrival: float | datetime
    pods: Annotated[int, Field(ge=1, le=MAX_PODS)]  # what the solver models (solver.screen)
    gpus_per_pod: Annotated[int, GPUS_PER_POD.field()]
    gpu_model: str | None = None
    duration: Annotated[float, Field(gt=0)] | None = None
    steps: Annotated[float, Field(gt=0)] | None = None
    steps_per_second: Annotated[float, Field(gt=0)] | None = None
    running_estimate: float | None = None
    queue: str | None = None
    priority: int | None = None
    priority_class: str | None = None
    tensor_parallel: Annotated[int, Field(ge=1)] | None = None
    pipeline_parallel: Annotated[int, Field(ge=1)] | None = None
    data_parallel: Annotated[int, Field(ge=1)] | None = None
    model_parameters: Annotated[float, Field(gt=0)] | None = None
    step_time: Annotated[float, Field(gt=0)] | None = None
    tolerated_share: Annotated[float, Field(gt=0, le=1)] | None = None
    optimizer_sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] | None = None
    may_split: bool = False
    max_clusters: Annotated[int, Field(ge=1)] | None = None
    unit_pods: Annotated[int, Field(ge=1)] | None = None
    unit_tier: Annotated[int, Field(ge=1)] | None = None
    min_units: Annotated[int, Field(ge=1)] | None = None
    dataset: Annotated[str, Field(max_length=253)] | None = None
    dataset_size: int | None = None
    dataset_clusters: str | None = None
    dataset_region: str | None = None
    checkpoint_size: int | None = None

    @field_validator("dataset_size", "checkpoint_size", mode="plain")
    @classmethod
    def _bytes(cls, value: object) -> int:
        try:
            return int(parse_quantity(value))
        except ValueError as exc:
            raise ValueError(f"must be bytes or a quantity such as 40Ti: {exc}") from None

    @field_validator("arrival", mode="plain")
    @classmethod
    def _seconds_or_time(cls, value: object) -> float | datetime:
        # Plain: pydantic would read a bare number as a Unix time, and a time as seconds.
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return _aware(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            if math.isfinite(value) and value >= 0:
                return float(value)
        raise ValueError(_must_be("arrival", value))

    @field_validator("running_estimate", mode="plain")
    @classmethod
    def _seconds_or_go_duration(cls, value: object) -> float:
        # A duration of no time ("0s") would read as the server's default estimate: refused.
        seconds = math.nan
        if isinstance(value, str) and GO_DURATION.fullmatch(value):
            seconds = go_duration_seconds(value)  # as the server reads a job's estimate
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            try:
                seconds = float(value)
            except ValueError:
                pass
        if not 0 < seconds < math.inf:
            raise ValueError(_must_be("runningEstimate", value))
        return seconds

    @property
    def has_plan(self) -> bool:
        return any(getattr(self, name) is not None for name in PLAN_FIELDS)


PLAN_FIELDS = (
    "tensor_parallel",
    "pipeline_parallel",
    "data_parallel",
    "model_parameters",
    "step_time",
    "tolerated_share",
    "optimizer_sharding",
)
COLUMNS = {field.alias or name: name for name, field in TraceRow.model_fields.items()}


class TraceError(ValueError):
    """Every problem found in a trace file, by line: `FILE:LINE: column NAME: message` each."""

    def __init__(self, path: Path, problems: list[tuple[int, str]]) -> None:
        self.problems = [
            f"{path}:{line}: {message}" if line else f"{path}: {message}"
            for line, message in sorted(problems, key=lambda p: p[0])
        ]
        shown = self.problems[:MAX_SHOWN]
        if len(self.problems) > MAX_SHOWN:
            shown.append(f"... and {len(self.problems) - MAX_SHOWN} more")
        super().__init__("\n".join(shown))


class _Cell(Exception):
    """A cell that is valid alone but not with the rest of its row."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(f"{column}: {message}")
        self.column = column
        self.message = message


def _must_be(column: str, value: object) -> str:
    return f"must be {EXPECTED[column]}, got {value!r}"


def read_trace(
    path: Path,
    kind: Literal["csv", "jsonl"],
    *,
    limit: int | None = None,
    gpu_model: str | None = None,
    defaults: SchedulingDefaults | None = None,
) -> list[TraceJob]:
    """The jobs of a CSV or JSONL trace, by arrival (ties in file order), the first `limit`.
    `gpu_model` is asked for by rows that name none; priority classes, the default queue and
    the most clusters of a split job are the scheduler's (`defaults`, its settings' defaults
    when not given)."""
    defaults = defaults or SchedulingDefaults()
    problems: list[tuple[int, str]] = []
    rows: list[tuple[int, TraceRow]] = []
    for line, cells in _csv_cells(path) if kind == "csv" else _jsonl_cells(path):
        unknown = [name for name in cells if name not in COLUMNS]
        if unknown:
            problems.append((line, _unknown(unknown)))
            continue
        try:
            rows.append((line, TraceRow.model_validate(cells)))
        except ValidationError as exc:
            problems += [(line, f"column {error}") for error in _cell_errors(exc)]
    if not rows and not problems:
        problems.append((0, "no jobs"))
    arrivals = _arrivals(rows, problems)
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for number, ((line, row), arrival) in enumerate(zip(rows, arrivals, strict=True), start=1):
        job_id = row.id or f"row-{number}"
        try:
            if job_id in seen:
                raise _Cell("id", f"{job_id!r} is already the id of line {seen[job_id]}")
            seen[job_id] = line
            jobs.append(_job(row, job_id, arrival, gpu_model=gpu_model, defaults=defaults))
        except _Cell as cell:
            problems.append((line, f"column {cell.column}: {cell.message}"))
    if problems:
        raise TraceError(path, problems)
    jobs.sort(key=lambda j: j.arrival_s)
    return jobs[:limit] if limit else jobs


def _csv_cells(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """(line a row starts on, its non-empty cells by column); the first line names the columns."""
    # utf-8-sig: the byte-order mark spreadsheets write is not part of the first column name
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = [name.strip() for name in next(reader, [])]
        if not header:
            raise TraceError(path, [(1, "the first line must name the columns")])
        unknown = [name for name in header if name not in COLUMNS]
        if unknown:
            raise TraceError(path, [(1, _unknown(unknown))])
        doubled = sorted({name for name in header if header.count(name) > 1})
        if doubled:
            raise TraceError(path, [(1, f"columns named twice: {', '.join(doubled)}")])
        start = reader.line_num + 1
        for cells in reader:
            line, start = start, reader.line_num + 1
            if len(cells) > len(header):
                columns = len(header)
                raise TraceError(path, [(line, f"{len(cells)} cells, the header names {columns}")])
            given = {name: c.strip() for name, c in zip(header, cells, strict=False) if c.strip()}
            if given:
                yield line, given


def _jsonl_cells(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8-sig") as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TraceError(path, [(line, f"not JSON: {exc.msg}")]) from None
            if not isinstance(raw, dict):
                raise TraceError(path, [(line, "must be a JSON object, one job per line")])
            cells = {k: v.strip() if isinstance(v, str) else v for k, v in raw.items()}
            yield line, {k: v for k, v in cells.items() if v not in (None, "")}


def _unknown(names: list[str]) -> str:
    named = []
    for name in names:
        close = difflib.get_close_matches(name, list(COLUMNS), n=1)
        named.append(f"{name!r} (did you mean {close[0]}?)" if close else repr(name))
    return f"unknown column{'s' if len(names) > 1 else ''} {', '.join(named)}"


def _cell_errors(exc: ValidationError) -> list[FieldError]:
    """One message per column, in the project's field-error form (`pods: must be ...`)."""
    errors: dict[str, FieldError] = {}
    for e in exc.errors(include_url=False):
        column = str(e["loc"][0])
        if column in errors:
            continue  # a union's second member saying the same
        if e["type"] == "missing":
            message = "required"
        elif e["type"] == "value_error":
            message = e["msg"]
        else:
            message = _must_be(column, e["input"])
        errors[column] = field_error([column], message)
    return list(errors.values())


def _aware(text: str) -> datetime:
    try:
        time = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(_must_be("arrival", text)) from None
    if time.tzinfo is None:
        raise ValueError(f"an ISO-8601 time needs a zone (Z or +02:00), got {text!r}")
    return time


def _arrivals(rows: list[tuple[int, TraceRow]], problems: list[tuple[int, str]]) -> list[float]:
    """Seconds from the start: as written, or ISO-8601 times made relative to the earliest."""
    seconds = [row.arrival for _, row in rows if not isinstance(row.arrival, datetime)]
    times = [row.arrival for _, row in rows if isinstance(row.arrival, datetime)]
    if not times:
        return seconds
    if not seconds:
        start = min(times)
        return [(time - start).total_seconds() for time in times]

    def kind(row: TraceRow) -> str:
        return "an ISO-8601 time" if isinstance(row.arrival, datetime) else "seconds"

    first_line, first = rows[0]
    line, other = next((n, row) for n, row in rows if kind(row) != kind(first))
    problems.append(
        (
            line,
            f"column arrival: {kind(other)} here but {kind(first)} on line {first_line}: "
            "give one or the other throughout",
        )
    )
    return [0.0] * len(rows)


def _job(
    row: TraceRow,
    job_id: str,
    arrival: float,
    *,
    gpu_model: str | None,
    defaults: SchedulingDefaults,
) -> TraceJob:
    plan = _plan(row) if row.has_plan else None
    if row.unit_pods is not None:
        unit = row.unit_pods
        if row.pods % unit:
            raise _Cell("unitPods", f"must divide pods ({row.pods}), got {unit}")
    elif plan is not None:
        # One data-parallel replica, as the server reads a plan (jobspec.normalize); the plan's
        # check (TP x PP divides the GPUs) makes it divide the pods.
        unit = max(plan.unit_gpus // plan.gpus_per_pod, 1)
    else:
        unit = 0  # the whole job is one unit
    units = row.pods // unit if unit else 1
    if row.min_units is not None and row.min_units > units:
        raise _Cell("minUnits", f"must be at most the job's {units} units, got {row.min_units}")
    return TraceJob(
        job_id,
        arrival,
        row.pods,
        row.gpus_per_pod,
        _duration(row),
        canonical_or_none(row.gpu_model or gpu_model),  # GFD product names too
        splittable=row.may_split,
        unit_pods=unit,
        max_clusters=row.max_clusters or (defaults.max_clusters if row.may_split else 1),
        unit_tier=row.unit_tier,
        allreduce_gbps=allreduce_gbps(plan) if plan else 0.0,
        comm_share=plan.tolerated_communication_share if plan else 0.0,
        priority=_priority(row, defaults),
        queue=row.queue or defaults.default_queue,
        estimate_s=row.running_estimate,
        min_units=row.min_units or 0,
        datasets=_datasets(row),
        checkpoint_bytes=row.checkpoint_size,
    )


def _datasets(row: TraceRow) -> tuple[DatasetRef, ...]:
    """The row's dataset, where it says it is: on clusters, or in a region."""
    if row.dataset is None:
        for column in ("dataset_size", "dataset_clusters", "dataset_region"):
            if getattr(row, column) is not None:
                raise _Cell(to_camel(column), "needs a dataset name in column dataset")
        return ()
    clusters = tuple(c for c in re.split(r"[\s;]+", row.dataset_clusters or "") if c)
    return (DatasetRef(row.dataset, row.dataset_size, clusters, row.dataset_region),)


def _duration(row: TraceRow) -> float:
    if row.duration is not None:
        if row.steps is not None or row.steps_per_second is not None:
            column = "steps" if row.steps is not None else "stepsPerSecond"
            raise _Cell(column, "give duration, or steps and stepsPerSecond, not both")
        return row.duration
    if row.steps is None:
        if row.steps_per_second is not None:
            raise _Cell("steps", "required with stepsPerSecond")
        raise _Cell("duration", "required (or steps and stepsPerSecond)")
    if row.steps_per_second is None:
        raise _Cell("stepsPerSecond", "required with steps")
    return row.steps / row.steps_per_second


def _priority(row: TraceRow, defaults: SchedulingDefaults) -> int:
    if row.priority_class is None:
        return row.priority or 0
    if row.priority is not None:
        raise _Cell("priorityClass", "give priority or priorityClass, not both")
    # The server's classes on a first start: the settings' and the built-in system ones.
    classes = {**defaults.priority_classes, **{n: c.value for n, c in BUILT_IN.items()}}
    if row.priority_class not in classes:
        known = ", ".join(sorted(classes))
        raise _Cell(
            "priorityClass", f"unknown priority class {row.priority_class!r}; known: {known}"
        )
    return classes[row.priority_class]


def _plan(row: TraceRow) -> Communication:
    """The row's parallelism plan, checked against its GPUs; as `_llm_job` declares one (bf16
    gradients, ZeRO-1 unless the row says otherwise)."""
    if row.gpus_per_pod == 0:
        raise _Cell("gpusPerPod", "must be >= 1 for a job with a communication plan, got 0")
    gpus = row.pods * row.gpus_per_pod
    tp, pp = row.tensor_parallel or 1, row.pipeline_parallel or 1
    dp = row.data_parallel
    if dp is None:
        if gpus % (tp * pp):
            column = "pipelineParallel" if row.pipeline_parallel else "tensorParallel"
            raise _Cell(
                column,
                f"tensorParallel x pipelineParallel = {tp * pp} must divide the job's {gpus} "
                "GPUs (pods x gpusPerPod)",
            )
        dp = gpus // (tp * pp)
    elif row.tensor_parallel and row.pipeline_parallel and tp * pp * dp != gpus:
        raise _Cell(
            "dataParallel",
            f"tensorParallel x pipelineParallel x dataParallel = {tp * pp * dp} must equal the "
            f"job's {gpus} GPUs (pods x gpusPerPod)",
        )
    share = row.tolerated_share
    if share is None:  # the plan's own default, as in the communication annotation
        share = Communication.model_fields["tolerated_communication_share"].default
    return Communication(
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=dp,
        gpus_per_pod=row.gpus_per_pod,
        model_parameters=row.model_parameters,
        gradient_bytes_per_parameter=2,
        optimizer_sharding=row.optimizer_sharding or "zero1",
        target_step_time_seconds=row.step_time,
        tolerated_communication_share=share,
    )
