"""`vglobal plan`: a parallelism plan in, the Volcano Job and its derived facts out; with
`--check`, where the Global would place it now."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from volcano_global.cli.client import CliError
from volcano_global.cli.context import client
from volcano_global.cli.data import size

if TYPE_CHECKING:
    from volcano_global.sdk import Dataset, ParallelPlan

# The derived facts and the check go to stderr, so stdout is the document alone.
notes = Console(stderr=True)

OPTIMIZERS = ["none", "zero1", "zero2", "zero3", "fsdp"]

# The options whose help does not fit beside their name.
OptimizerOption = Annotated[str, typer.Option(help=f"Optimizer sharding: {', '.join(OPTIMIZERS)}")]
CommShareOption = Annotated[
    float, typer.Option(help="Share of the step the cross-cluster exchange may take")
]
ReplicaInTier1Option = Annotated[
    bool, typer.Option(help="Keep each DP replica inside one tier-1 HyperNode")
]
DatasetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--dataset",
        help="A dataset the run reads: NAME=SIZE (a DataSource's name, e.g. corpus-v3=40Ti), "
        "or NAME=SIZE@GBPS when it may read it remotely at GBPS instead of staging it",
    ),
]
CheckpointSizeOption = Annotated[
    str | None, typer.Option(help="The checkpoint's size, e.g. 2Ti (what a restore moves)")
]
CheckOption = Annotated[
    bool, typer.Option(help="Ask the Global where it would run now (POST /api/v1/jobs/preview)")
]


def plan(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Job name")],
    data_parallel: Annotated[int, typer.Option("--dp", help="Data-parallel replicas")],
    tensor_parallel: Annotated[int, typer.Option("--tp", help="Tensor parallel (in a node)")] = 1,
    pipeline_parallel: Annotated[int, typer.Option("--pp", help="Pipeline stages")] = 1,
    context_parallel: Annotated[int, typer.Option("--cp", help="Context parallel")] = 1,
    expert_parallel: Annotated[int, typer.Option("--ep", help="Expert parallel")] = 1,
    gpus_per_pod: Annotated[int, typer.Option(help="GPUs per pod (node)")] = 8,
    params: Annotated[float | None, typer.Option(help="Model parameters, e.g. 70e9")] = None,
    gradient_bytes: Annotated[float, typer.Option(help="Bytes per gradient value (bf16: 2)")] = 2.0,
    optimizer: OptimizerOption = "none",
    step_time: Annotated[float | None, typer.Option(help="Target step time (s)")] = None,
    comm_share: CommShareOption = 0.1,
    replica_in_tier1: ReplicaInTier1Option = False,
    image: Annotated[str, typer.Option(help="Training image")] = "nvcr.io/nvidia/nemo:25.02",
    namespace: Annotated[
        str | None,
        typer.Option("-n", "--namespace", help="[default: the queue's name, else default]"),
    ] = None,
    queue: Annotated[str | None, typer.Option(help="Queue")] = None,
    gpu_model: Annotated[str | None, typer.Option(help="GPU model (nodeSelector)")] = None,
    max_clusters: Annotated[int | None, typer.Option(help="Most clusters a split may span")] = None,
    dataset: DatasetOption = None,
    checkpoint_size: CheckpointSizeOption = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the document here")] = None,
    check: CheckOption = False,
) -> None:
    """Build the Volcano Job for a parallelism plan and show what the scheduler derives from
    it: the unit that stays in one cluster and the bandwidth a cluster crossing needs."""
    # Imported here: the SDK's models take ~0.3 s to import, which every other command of
    # the CLI would pay.
    from volcano_global.sdk import job_document
    from volcano_global.sdk.plan import to_yaml

    if optimizer not in OPTIMIZERS:
        raise typer.BadParameter(f"one of {', '.join(OPTIMIZERS)}", param_hint="--optimizer")
    parallel = _parallel_plan(
        tensor_parallel=tensor_parallel,
        pipeline_parallel=pipeline_parallel,
        data_parallel=data_parallel,
        context_parallel=context_parallel,
        expert_parallel=expert_parallel,
        gpus_per_pod=gpus_per_pod,
        model_parameters=params,
        gradient_bytes_per_parameter=gradient_bytes,
        optimizer_sharding=optimizer,
        target_step_time_seconds=step_time,
        tolerated_communication_share=comm_share,
        replica_in_tier1=replica_in_tier1,
        datasets=tuple(_dataset(d) for d in dataset or ()),
        checkpoint_size=checkpoint_size,
    )
    document = job_document(
        parallel,
        name=name,
        image=image,
        # A queue's jobs run in its own namespace unless its tenancy says otherwise
        # (settings `tenancy.default_namespaces`): `default` would be refused.
        namespace=namespace or queue or "default",
        queue=queue,
        gpu_model=gpu_model,
        max_clusters=max_clusters,
    )
    text = to_yaml(document)
    _write(text, out)
    notes.print(_facts_table(parallel, max_clusters=max_clusters or 4))
    if check:
        _check(ctx, text)


# The plan's fields by the option that sets them, to name the option a refusal is about.
PLAN_OPTIONS = {
    "tensor_parallel": "--tp",
    "pipeline_parallel": "--pp",
    "data_parallel": "--dp",
    "context_parallel": "--cp",
    "expert_parallel": "--ep",
    "gpus_per_pod": "--gpus-per-pod",
    "model_parameters": "--params",
    "gradient_bytes_per_parameter": "--gradient-bytes",
    "optimizer_sharding": "--optimizer",
    "target_step_time_seconds": "--step-time",
    "tolerated_communication_share": "--comm-share",
    "replica_in_tier1": "--replica-in-tier1",
    "checkpoint_size": "--checkpoint-size",
}


def _parallel_plan(**fields: Any) -> ParallelPlan:
    """The plan from the command's options; what is wrong with them is the command's error,
    naming the option where one field is wrong (`--dp: ...`)."""
    from volcano_global.sdk import ParallelPlan

    try:
        return ParallelPlan(**fields)
    except ValidationError as exc:
        raise CliError("; ".join(_refusal(e) for e in exc.errors())) from None


def _refusal(error: Any) -> str:
    message = error["msg"].removeprefix("Value error, ")
    option = PLAN_OPTIONS.get(str(error["loc"][0])) if error["loc"] else None
    return f"{option}: {message}" if option else message


def _write(text: str, out: Path | None) -> None:
    if out is not None:
        out.write_text(text)
    else:
        sys.stdout.write(text)  # the document alone on stdout: `vglobal plan ... > job.yaml`


def _facts_table(parallel: ParallelPlan, *, max_clusters: int) -> Table:
    """What the scheduler derives from the plan: the unit kept in one cluster, the exchange's
    size and rate, the bandwidth a split over 2..max_clusters clusters needs, the data."""
    facts = parallel.facts(max_clusters=max_clusters)
    table = Table("derived", "value", title="what the scheduler derives", title_justify="left")
    table.add_row("world", f"{facts.world_gpus} GPUs = {facts.world_pods} pods")
    table.add_row(
        "unit (one DP replica, stays in one cluster)",
        f"{facts.unit_gpus} GPUs = {facts.unit_pods} pods",
    )
    if facts.gradient_bytes:
        table.add_row("gradient per step", f"{facts.gradient_bytes / 1e9:,.1f} GB")
    if facts.communication_budget_s:
        table.add_row("time for the exchange (tau)", f"{facts.communication_budget_s:g} s")
    table.add_row(
        "all-reduce rate V/tau",
        f"{facts.allreduce_gbps:,.1f} Gbps" if facts.allreduce_gbps else "not declared (free)",
    )
    for k, gbps in facts.crossing_gbps.items():
        table.add_row(f"split over {k} clusters", f"{gbps:,.1f} Gbps per pair of clusters")
    for d in parallel.datasets:
        read = f", or read remotely at {d.read_gbps:g} Gbps" if d.read_gbps else ""
        table.add_row(f"dataset {d.name}", f"{size(d.size_bytes)}{read}")
    if facts.checkpoint_bytes is not None:
        table.add_row("checkpoint (a restore elsewhere moves)", size(facts.checkpoint_bytes))
    return table


def _dataset(text: str) -> Dataset:
    from volcano_global.sdk import Dataset

    name, _, rest = text.partition("=")
    amount, _, gbps = rest.partition("@")
    try:
        return Dataset(name=name, size=amount or None, read_gbps=float(gbps) if gbps else None)
    except ValidationError as exc:
        why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise typer.BadParameter(f"{text!r}: {why}", param_hint="--dataset") from None
    except ValueError as exc:  # the read rate is not a number
        raise typer.BadParameter(f"{text!r}: {exc}", param_hint="--dataset") from None


def _check(ctx: typer.Context, document: str) -> None:
    preview = client(ctx).request(
        "POST",
        "/api/v1/jobs/preview",
        content=document.encode(),
        headers={"Content-Type": "application/yaml"},
    )
    if preview["admitted"]:
        parts = [f"{s['pods']} pods in {s['cluster']}" for s in preview["shares"]]
        parts += [
            f"{r['gbps']:g} Gbps on {r['clusterA']}<->{r['clusterB']}"
            for r in preview["linkReservations"]
        ]
        notes.print("It could start now: " + "; ".join(parts))
    else:
        notes.print(f"It could not start now: {preview['reason']}")
