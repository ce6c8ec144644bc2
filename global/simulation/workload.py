"""Jobs to replay: readers for the public traces in `../shared/data/traces/` and a seeded
synthetic LLM-scale generator. Every duration is the job's run time at full speed (the speed
model may stretch it); the assumptions that turn a trace's fields into one are stated here.

- Philly (Gavel's `philly_gavel/*.trace`): duration = total_steps / (steps per second of the job
  type on one GPU x GPUs); the per-type rates below are round numbers of the order Gavel
  reports for V100s, not measurements. One pod of `scale_factor` GPUs; never split.
- Pollux (`pollux/workload-*.csv`): duration = the application's GPU-hours below /
  num_replicas (one GPU per replica, one pod each, the job a gang of its replicas); never split.
- Synthetic LLM mix (Kalos, from `acme_cluster_summary.csv`): sizes as in bench/workloads.py
  (1 GPU with probability 1/2, else 2..1024 GPUs with P(s) ~ s^-alpha so the mean is Kalos's
  26.77); durations log-normal with Kalos's median (124 s) and mean (1,259 s) run time, capped
  at 4 hours by default (the tail beyond would make one job the whole benchmark); jobs of 64
  GPUs or more are LLM pretraining gangs that declare a plan (TP 8,
  PP by size, 7B..175B parameters, bf16, ZeRO-1, 10-30 s steps, 10-30 % tolerated for
  communication) and may split over up to 4 clusters; Poisson arrivals at the rate that gives
  the requested load (offered GPU-seconds per second / total GPUs).
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass, replace
from pathlib import Path

from volcano_global.jobspec import Communication
from volcano_global.solver.traffic import allreduce_gbps

PHILLY_STEPS_PER_S = {
    "ResNet-18": 10.0,
    "ResNet-50": 3.0,
    "Transformer": 8.0,
    "LM": 5.0,
    "Recommendation": 20.0,
    "CycleGAN": 2.0,
    "A3C": 10.0,
}
POLLUX_GPU_HOURS = {
    "cifar10": 1.0,
    "ncf": 0.5,
    "deepspeech2": 8.0,
    "yolov3": 16.0,
    "imagenet": 64.0,
    "bert": 4.0,
}
SIZES = [2**i for i in range(1, 11)]
ACME_SUMMARY = Path(__file__).resolve().parent / "data" / "acme_cluster_summary.csv"


@dataclass(frozen=True)
class DatasetRef:
    """A dataset a trace job reads: its name, and where a trace row said it is and how big
    (None: as the scenario, or another row, says)."""

    name: str
    size_bytes: int | None = None
    clusters: tuple[str, ...] = ()
    region: str | None = None


@dataclass(frozen=True)
class TraceJob:
    id: str
    arrival_s: float
    pods: int
    gpus_per_pod: int
    duration_s: float  # at full speed
    gpu_model: str | None = None
    splittable: bool = False
    unit_pods: int = 0
    max_clusters: int = 1
    unit_tier: int | None = None
    allreduce_gbps: float = 0.0  # V / tau of its declared plan (0: none)
    comm_share: float = 0.0  # the share of a step it tolerates for the exchange
    priority: int = 0
    queue: str = "default"
    estimate_s: float | None = None  # the user's runningEstimate, if given (never the truth)
    min_units: int = 0  # elastic: may run with as few units (data-parallel replicas); 0: rigid
    preemption_policy: str = "PreemptLowerPriority"  # its priority class's; or "Never"
    preemptable: bool = True  # False: annotated volcano.sh/preemptable: "false"
    datasets: tuple[DatasetRef, ...] = ()  # what it reads (must be local where it runs)
    checkpoint_bytes: int | None = None  # the size of its checkpoint, once it has written one

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def read_philly(
    path: Path, *, limit: int | None = None, gpu_model: str | None = None
) -> list[TraceJob]:
    jobs = []
    with path.open() as f:
        for i, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 7:
                raise ValueError(f"{path}:{i + 1}: expected 7 tab-separated fields")
            kind = parts[0].split(" (")[0]
            if kind not in PHILLY_STEPS_PER_S:
                raise ValueError(f"{path}:{i + 1}: unknown job type {kind!r}")
            steps, arrival, gpus = int(parts[4]), float(parts[5]), int(parts[6])
            duration = steps / (PHILLY_STEPS_PER_S[kind] * gpus)
            jobs.append(TraceJob(f"philly-{i}", arrival, 1, gpus, duration, gpu_model))
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    return jobs[:limit] if limit else jobs


def read_pollux(path: Path, *, gpu_model: str | None = None) -> list[TraceJob]:
    jobs = []
    with path.open() as f:
        for i, row in enumerate(csv.DictReader(f)):
            app = row["application"]
            if app not in POLLUX_GPU_HOURS:
                raise ValueError(f"{path}:{i + 2}: unknown application {app!r}")
            replicas = int(row["num_replicas"])
            duration = POLLUX_GPU_HOURS[app] * 3600 / replicas
            jobs.append(TraceJob(row["name"], float(row["time"]), replicas, 1, duration, gpu_model))
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    return jobs


def kalos(acme_summary: Path) -> dict[str, float]:
    with acme_summary.open() as f:
        row = next(r for r in csv.DictReader(f) if r["id"] == "Kalos")
    return {
        "mean_gpus": float(row["avg_gpu_num"]),
        "median_run_s": float(row["med_run_time_gpu"]),
        "mean_run_s": float(row["avg_run_time_gpu"]),
        "max_run_s": float(row["max_run_time_gpu"]),
    }


def size_distribution(mean: float) -> tuple[float, list[tuple[int, float]]]:
    """(alpha, [(GPUs, probability)]): half the jobs take 1 GPU, the rest s in 2..1024 with
    P ~ s^-alpha, alpha found by bisection so that the mean is `mean`."""

    def dist(alpha: float) -> list[tuple[int, float]]:
        weights = [s**-alpha for s in SIZES]
        total = sum(weights)
        return [(1, 0.5)] + [(s, 0.5 * w / total) for s, w in zip(SIZES, weights, strict=True)]

    low, high = 0.0, 3.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(s * p for s, p in dist(mid)) > mean:
            low = mid
        else:
            high = mid
    return low, dist(low)


def synthetic_llm(
    *,
    seed: int,
    jobs: int,
    load: float,
    capacity_gpus: int,
    acme_summary: Path = ACME_SUMMARY,
    gpu_model: str | None = None,
    max_duration_s: float = 4 * 3600,
    min_gpus: int = 1,
    elastic_share: float = 0.0,
    max_gpus: int | None = None,
) -> list[TraceJob]:
    """`min_gpus` > 1 keeps only the sizes from there up, in Kalos's proportions among them
    (the gang-heavy fleets: `min_gpus=32`), and `max_gpus` those up to it (a whole cluster:
    `gang-equal-regions.yaml`). `elastic_share`: the share of the planned gangs
    that may run with as few as half their data-parallel replicas (drawn apart, so the rest of
    the trace is the same with or without)."""
    rng = random.Random(seed)
    stats = kalos(acme_summary)
    _, dist = size_distribution(stats["mean_gpus"])
    dist = [(s, p) for s, p in dist if s >= min_gpus and s <= (max_gpus or s)] or dist[-1:]
    # log-normal with Kalos's median and mean: mu = ln(median), sigma^2 = 2 ln(mean / median)
    mu = math.log(stats["median_run_s"])
    sigma = math.sqrt(2 * math.log(stats["mean_run_s"] / stats["median_run_s"]))
    sizes = rng.choices([s for s, _ in dist], weights=[p for _, p in dist], k=jobs)
    cap = min(max_duration_s, stats["max_run_s"])
    durations = [min(rng.lognormvariate(mu, sigma), cap) for _ in sizes]
    offered = sum(s * d for s, d in zip(sizes, durations, strict=True)) / jobs
    rate = load * capacity_gpus / offered  # arrivals per second
    t = 0.0
    out = []
    for i, (gpus, duration) in enumerate(zip(sizes, durations, strict=True)):
        t += rng.expovariate(rate)
        out.append(_llm_job(i, t, gpus, duration, rng, gpu_model))
    if elastic_share > 0:
        draw = random.Random(seed + 7919)
        out = [
            replace(j, min_units=max(j.pods // j.unit_pods // 2, 1))
            if j.splittable and j.pods // j.unit_pods > 1 and draw.random() < elastic_share
            else j
            for j in out
        ]
    return out


def _llm_job(
    index: int, arrival: float, gpus: int, duration: float, rng: random.Random, model: str | None
) -> TraceJob:
    priority = rng.choices([0, 500, 1000], weights=[6, 3, 1])[0]
    queue = f"q{rng.randrange(4)}"
    if gpus < 64:
        pods, per_pod = (1, gpus) if gpus < 8 else (gpus // 8, 8)
        return TraceJob(
            f"llm-{index}", arrival, pods, per_pod, duration, model, priority=priority, queue=queue
        )
    pp = 1 if gpus <= 64 else 2 if gpus <= 128 else 4 if gpus <= 256 else 8
    share = rng.uniform(0.1, 0.3)
    plan = Communication(
        tensor_parallel=8,
        pipeline_parallel=pp,
        data_parallel=gpus // (8 * pp),
        gpus_per_pod=8,
        model_parameters={1: 7e9, 2: 13e9, 4: 70e9, 8: 175e9}[pp],
        gradient_bytes_per_parameter=2,
        optimizer_sharding="zero1",
        target_step_time_seconds=rng.uniform(10, 30),
        tolerated_communication_share=share,
    )
    return TraceJob(
        f"llm-{index}",
        arrival,
        gpus // 8,
        8,
        duration,
        model,
        splittable=True,
        unit_pods=pp,
        max_clusters=4,
        unit_tier=1 if rng.random() < 0.5 else None,
        allreduce_gbps=allreduce_gbps(plan),
        comm_share=share,
        priority=priority,
        queue=queue,
    )


HIGH_PRIORITY = 1000


def two_priority_classes(jobs: list[TraceJob], high_share: float, seed: int) -> list[TraceJob]:
    """The jobs in two priority classes: `high_share` of them (drawn apart from the trace, so
    the rest of it is the same) at priority 1000, the rest at 0."""
    draw = random.Random(seed + 104729)
    return [replace(j, priority=HIGH_PRIORITY if draw.random() < high_share else 0) for j in jobs]


def data_heavy(
    *,
    seed: int,
    jobs: int,
    load: float,
    capacity_gpus: int,
    datasets: list[str],
    median_run_s: float = 2 * 3600,
    mean_run_s: float = 3 * 3600,
    max_run_s: float = 12 * 3600,
) -> list[TraceJob]:
    """LLM training and fine-tuning jobs that each read one corpus (`datasets`, the most
    popular first: Zipf weights 1/k) and write a checkpoint: 8 to 128 GPUs, log-normal run
    times of hours (pretraining runs, not Kalos's minutes), Poisson arrivals at `load` of the
    fleet. Every job's checkpoint is 16 bytes per parameter of a model its size suggests."""
    rng = random.Random(seed)
    mu = math.log(median_run_s)
    sigma = math.sqrt(2 * math.log(mean_run_s / median_run_s))
    sizes = rng.choices([8, 16, 32, 64, 128], weights=[30, 25, 20, 15, 10], k=jobs)
    durations = [min(rng.lognormvariate(mu, sigma), max_run_s) for _ in sizes]
    rate = load * capacity_gpus / (sum(s * d for s, d in zip(sizes, durations, strict=True)) / jobs)
    weights = [1 / (k + 1) for k in range(len(datasets))]
    t, out = 0.0, []
    for i, (gpus, duration) in enumerate(zip(sizes, durations, strict=True)):
        t += rng.expovariate(rate)
        job = _llm_job(i, t, gpus, duration, rng, None)
        corpus = rng.choices(datasets, weights=weights)[0]
        parameters = {8: 7e9, 16: 7e9, 32: 13e9, 64: 34e9, 128: 70e9}[gpus]
        out.append(
            replace(
                job,
                id=f"data-{i}",
                datasets=(DatasetRef(corpus),),
                checkpoint_bytes=int(16 * parameters),
            )
        )
    return out
