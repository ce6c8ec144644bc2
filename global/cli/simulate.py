"""`vglobal simulate`: replay a trace against described clusters, per policy, on a virtual
clock; write the results (CSV, JSON, plots) and print the comparison."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from volcano_global.cli.client import CliError
from volcano_global.cli.output import console
from volcano_global.simulation.comparison import Judged, bounds, judge, verdict
from volcano_global.simulation.engine import SimOptions, SimResult, Simulation
from volcano_global.simulation.metrics import Summary, summarise
from volcano_global.simulation.report import write
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.trace_file import read_trace
from volcano_global.simulation.workload import (
    TraceJob,
    data_heavy,
    read_philly,
    read_pollux,
    synthetic_llm,
    two_priority_classes,
)
from volcano_global.solver import Policy, planning
from volcano_global.solver.data import size_text
from volcano_global.solver.gravity import DataMode, DataOptions
from volcano_global.solver.preemption import Rules

# What is simulated, and where the results go.
ScenarioOption = Annotated[Path, typer.Option(help="Clusters, links and queues (YAML)")]
OutOption = Annotated[Path, typer.Option(help="Where the results go")]

# The workload.
TraceOption = Annotated[
    str,
    typer.Option(
        help="synthetic (the LLM-scale mix), data-heavy (jobs of hours that each read one "
        "of the scenario's datasets), philly:FILE (Gavel's Philly trace), "
        "pollux:FILE (a Pollux workload CSV), or your own job history as csv:FILE or "
        "jsonl:FILE (columns: docs/simulation.md, 'Your own trace')"
    ),
]
JobsOption = Annotated[int, typer.Option(help="Jobs (synthetic: generated; traces: first N)")]
LoadOption = Annotated[float, typer.Option(help="Synthetic: offered GPU-seconds per second / GPUs")]
SeedOption = Annotated[int, typer.Option(help="Synthetic: random seed")]
MinGpusOption = Annotated[
    int,
    typer.Option(
        min=1, help="Synthetic: only jobs of this many GPUs or more (32: the gang-heavy mix)"
    ),
]
MaxGpusOption = Annotated[
    int | None,
    typer.Option(min=1, help="Synthetic: only jobs of this many GPUs or fewer"),
]
ElasticShareOption = Annotated[
    float,
    typer.Option(
        min=0,
        max=1,
        help="Synthetic: share of the planned gangs elastic down to half their replicas",
    ),
]
GpuModelOption = Annotated[
    str | None, typer.Option(help="GPU model the trace's jobs ask for (default: any)")
]
HighPriorityShareOption = Annotated[
    float,
    typer.Option(
        min=0,
        max=1,
        help="Two priority classes: this share of the jobs at priority 1000, the rest at 0",
    ),
]

# The scheduler.
PolicyOption = Annotated[
    list[Policy] | None, typer.Option(help="Policies to compare (repeat; default: all)")
]
WindowOption = Annotated[int, typer.Option(help="Pending jobs the solver considers per round")]
WholeQueueOption = Annotated[
    bool,
    typer.Option(help="Beyond the window, backfill whole jobs where they fit (whole_queue)"),
]
DeterministicTimeOption = Annotated[
    float, typer.Option(help="CP-SAT work per round (deterministic units)")
]
ReserveAfterOption = Annotated[
    float,
    typer.Option(
        min=0, help="Seconds a job waits before it is owed a reservation (cpsat, backfill)"
    ),
]

# Preemption, checkpoints and elastic resizes.
PreemptionOption = Annotated[
    bool, typer.Option(help="Preemption and reclaim (solver.preemption) in every policy")
]
MinRunOption = Annotated[
    float, typer.Option(min=0, help="Seconds a job runs before it may be evicted")
]
PreemptionCapOption = Annotated[int, typer.Option(min=1, help="Jobs evicted per round at most")]
MaxLostOption = Annotated[
    float | None,
    typer.Option(min=0, help="GPU-hours of work evictions may lose per round at most"),
]
WaitWeightOption = Annotated[
    float,
    typer.Option(
        min=0,
        help="Evict only when the preemptor's GPUs x its expected wait, times this, is at "
        "least the victims' lost GPU-hours (large: whenever victims are found)",
    ),
]
CheckpointOption = Annotated[
    float | None,
    typer.Option(min=1, help="An evicted job resumes from its last checkpoint, every this many s"),
]
ResizeRestartOption = Annotated[
    float,
    typer.Option(
        min=0, help="Seconds an elastic job's resize (checkpoint-restart) makes no progress"
    ),
]

# Data placement.
DataOption = Annotated[
    DataMode,
    typer.Option(
        help="Where jobs that read data may start: gravity (holders, or staging when it "
        "ends sooner), holders (only where the data is), oblivious (anywhere, then stage)"
    ),
]
StagingGbpsOption = Annotated[
    float, typer.Option(min=1, help="Most one copy takes on a link (Gbps)")
]
ReplicateReadersOption = Annotated[
    int,
    typer.Option(
        min=0,
        help="A dataset read by at least this many jobs in the last 24 h gets a copy, "
        "without GPUs, in each region that holds none (0: off)",
    ),
]


def simulate(
    scenario: ScenarioOption,
    trace: TraceOption = "synthetic",
    jobs: JobsOption = 500,
    load: LoadOption = 1.0,
    seed: SeedOption = 1,
    min_gpus: MinGpusOption = 1,
    max_gpus: MaxGpusOption = None,
    elastic_share: ElasticShareOption = 0.0,
    reserve_after: ReserveAfterOption = planning.RESERVE_AFTER_S,
    gpu_model: GpuModelOption = None,
    policy: PolicyOption = None,
    window: WindowOption = 100,
    whole_queue: WholeQueueOption = True,
    deterministic_time: DeterministicTimeOption = 0.5,
    high_priority_share: HighPriorityShareOption = 0.0,
    preemption: PreemptionOption = False,
    min_run: MinRunOption = Rules.min_run_s,
    preemption_cap: PreemptionCapOption = Rules.max_jobs,
    max_lost: MaxLostOption = None,
    wait_weight: WaitWeightOption = 1.0,
    checkpoint: CheckpointOption = None,
    resize_restart: ResizeRestartOption = SimOptions.resize_restart_s,
    data: DataOption = DataMode.GRAVITY,
    staging_gbps: StagingGbpsOption = DataOptions.staging_gbps,
    replicate_readers: ReplicateReadersOption = DataOptions.replicate_readers,
    out: OutOption = Path("vglobal-data/sim"),
) -> None:
    """What-if: replay a job trace through the scheduler's queue order and placement engine,
    per policy, and report JCT, queueing, allocation, splits, link use and the fluid bounds."""
    world = _scenario(scenario)
    capacity = Simulation(world, [], Policy.CPSAT).capacity_gpus
    datasets = [d.name for d in world.datasets]
    workload = _workload(
        trace, jobs, load, seed, gpu_model, capacity, (min_gpus, max_gpus), elastic_share, datasets
    )
    if high_priority_share > 0:
        workload = two_priority_classes(workload, high_priority_share, seed)
    rules = Rules(
        min_run_s=min_run,
        max_jobs=preemption_cap,
        max_lost_gpu_hours=max_lost,
        wait_weight=wait_weight,
    )
    options = SimOptions(
        window=window,
        whole_queue=whole_queue,
        deterministic_time=deterministic_time,
        reserve_after_s=reserve_after,
        preemption=rules if preemption else None,
        checkpoint_s=checkpoint,
        resize_restart_s=resize_restart,
        data=_data_options(data, staging_gbps, replicate_readers),
    )
    results, summaries = _run(world, workload, policy or list(Policy), options)
    _report(results, summaries, out, capacity, preemption=preemption)


def _scenario(path: Path) -> Scenario:
    try:
        return Scenario.load(path)
    except (OSError, ValidationError, ValueError) as exc:
        raise CliError(f"{path}: {exc}") from None


def _data_options(mode: DataMode, staging_gbps: float, replicate_readers: int) -> DataOptions:
    # A copy's floor never above its ceiling.
    min_staging_gbps = min(DataOptions.min_staging_gbps, staging_gbps)
    return DataOptions(
        mode,
        staging_gbps=staging_gbps,
        min_staging_gbps=min_staging_gbps,
        replicate_readers=replicate_readers,
    )


def _report(
    results: list[SimResult],
    summaries: list[Summary],
    out: Path,
    capacity_gpus: int,
    *,
    preemption: bool,
) -> None:
    """The results written to `out`, then the table, the verdict and the costs printed."""
    files = write(out, results, summaries)
    judged = judge(results)
    console.print(_table(results, summaries, judged, capacity_gpus))
    for job, why in sorted(results[0].left_out.items()):
        console.print(f"left out: {job}: {why}")
    console.print(verdict(judged))
    for line in _costs_lines(results, preemption=preemption) + _staging_lines(results):
        console.print(line)
    console.print(f"{len(files)} files in {out}")


def _run(
    world: Scenario, workload: list[TraceJob], policies: list[Policy], options: SimOptions
) -> tuple[list[SimResult], list[Summary]]:
    """Each policy over the workload, with a progress bar per policy."""
    results, summaries = [], []
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            for chosen in policies:
                task = progress.add_task(f"{chosen.value:>12}", total=len(workload))
                result = Simulation(world, workload, chosen, options).run(
                    lambda n, task=task: progress.advance(task, n)
                )
                results.append(result)
                summaries.append(summarise(result))
    except ValueError as exc:  # the trace's data and the scenario disagree
        raise CliError(str(exc)) from None
    return results, summaries


def _costs_lines(results: list[SimResult], *, preemption: bool) -> list[str]:
    """What evictions (with preemption on) and elastic resizes cost each policy."""
    lines = []
    for r in results:
        if preemption:
            lost = sum(rec.lost_gpu_s for rec in r.records) / 3600
            lines.append(f"{r.policy}: {len(r.evictions)} evictions, {lost:,.0f} GPU-hours lost")
        resizes = sum(rec.resizes for rec in r.records)
        if resizes:
            cost = sum(rec.resize_gpu_s for rec in r.records) / 3600
            lines.append(f"{r.policy}: {resizes} resizes, {cost:,.0f} GPU-hours restarting")
    return lines


def _staging_lines(results: list[SimResult]) -> list[str]:
    """Per policy that staged: bytes per link and between regions, and the time jobs held
    their GPUs while copying."""
    lines = []
    for r in results:
        if not r.moved_bytes:
            continue
        staged = [rec for rec in r.records if rec.staging_s > 0]
        hours = sum(rec.staging_s for rec in staged) / 3600
        links = ", ".join(
            f"{a}<->{b} {size_text(n)}" for (a, b), n in sorted(r.moved_bytes.items()) if n
        )
        lines.append(
            f"{r.policy}: staged {size_text(sum(r.moved_bytes.values()))} "
            f"({size_text(r.between_regions_bytes)} between regions) for {len(staged)} jobs, "
            f"{hours:,.1f} h staging; per link: {links}"
            + (f"; of which replicas {size_text(r.replicated_bytes)}" if r.replicated_bytes else "")
        )
    return lines


def _table(
    results: list[SimResult], summaries: list[Summary], judged: list[Judged], capacity: int
) -> Table:
    limit = bounds(results[0])
    left_out = len(results[0].left_out)
    table = Table(
        "policy",
        "finished",
        "avg JCT",
        "large gangs: JCT / max wait",
        "p99 JCT <= 8 GPUs",
        "makespan",
        "GPU alloc (backlog)",
        "split",
        "slowed",
        "cross-cluster",
        "oversubscribed",
        title=f"{judged[0].jobs} jobs judged on {capacity} GPUs, the same for every policy "
        f"(bound: avg JCT >= {_s(limit.avg_jct_s)}; a job a policy did not finish counts "
        "until the last finish of any policy"
        + (f"; {left_out} no policy can place, left out, listed below)" if left_out else ")"),
    )
    for s, j in zip(summaries, judged, strict=True):
        table.add_row(
            s.policy,
            f"{j.finished}/{j.jobs}",
            _s(j.avg_jct_s),
            f"{_s(j.large_avg_jct_s)} / {_s(j.large_wait_max_s)} ({j.large_jobs})",
            _s(j.p99_small_jct_s),
            _s(s.makespan_s),
            f"{_pct(s.gpu_allocation)} ({_pct(j.allocation_backlog)})",
            str(s.split_jobs),
            str(s.slowed_jobs),
            f"{s.crossing_tb:,.1f} TB",
            _s(s.oversubscribed_s),
        )
    return table


def _s(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds:,.0f} s"


def _pct(share: float) -> str:
    return "-" if math.isnan(share) else f"{100 * share:.1f}%"


def _workload(
    trace: str,
    jobs: int,
    load: float,
    seed: int,
    gpu_model: str | None,
    capacity: int,
    sizes: tuple[int, int | None] = (1, None),
    elastic_share: float = 0.0,
    datasets: list[str] | None = None,
) -> list[TraceJob]:
    kind, _, path = trace.partition(":")
    if kind == "data-heavy":
        if not datasets:
            raise CliError("--trace data-heavy needs a scenario with datasets")
        return data_heavy(
            seed=seed, jobs=jobs, load=load, capacity_gpus=capacity, datasets=datasets
        )
    try:
        if kind == "synthetic":
            return synthetic_llm(
                seed=seed,
                jobs=jobs,
                load=load,
                capacity_gpus=capacity,
                gpu_model=gpu_model,
                min_gpus=sizes[0],
                max_gpus=sizes[1],
                elastic_share=elastic_share,
            )
        if kind == "philly" and path:
            return read_philly(Path(path), limit=jobs, gpu_model=gpu_model)
        if kind == "pollux" and path:
            return read_pollux(Path(path), gpu_model=gpu_model)[:jobs]
        if kind == "csv" and path:
            return read_trace(Path(path), "csv", limit=jobs, gpu_model=gpu_model)
        if kind == "jsonl" and path:
            return read_trace(Path(path), "jsonl", limit=jobs, gpu_model=gpu_model)
    except (OSError, ValueError) as exc:
        raise CliError(str(exc)) from None
    raise typer.BadParameter(
        "synthetic, philly:FILE, pollux:FILE, csv:FILE or jsonl:FILE", param_hint="--trace"
    )
