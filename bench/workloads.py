"""Seeded instance generators for the solver benchmark (documented recipes).

Clusters ("5,000-node clusters, aggregated"): 625 ToR domains of 8 nodes under 25 spines, 8
GPUs per node. Each node is busy with probability u (the cluster's utilisation, drawn
uniformly from a range); a busy node has 0 free GPUs, or 2/4/6 with probability 0.2
(fragmentation). GPU model H100 or A100, alternating by cluster. The solver only ever sees
the per-ToR histograms.

Links: clusters come in regions (campuses) of 4. Within a region every pair is linked with
1.6 or 3.2 Tbps (data-centre interconnect on one campus); across regions a pair is linked with
probability 0.5 with 100 or 400 Gbps (long-haul). Running jobs
already hold 0-30% of each link.

LLM-scale job mix, parameterised from AcmeTrace's Kalos cluster (an LLM training cluster;
`acme_cluster_summary.csv`: median 1 GPU per job, mean 26.77, max 1,024): a job asks for
1 GPU with probability 1/2 (the median), otherwise s in {2, 4, ..., 1024} with probability
proportional to s^-alpha, alpha found by bisection so that the mean is Kalos's. Jobs of 8 GPUs
or more use 8-GPU pods. Jobs of 64 GPUs or more are LLM pretraining runs that declare their
plan: TP 8, PP 1/2/4/8 by size, model size by size (7B..175B), bf16 gradients, ZeRO-1, step
time 10-30 s, 10-30% of it tolerated for communication; they may split (up to 4 clusters) and
half of them keep every data-parallel replica under one ToR. Priorities: low 60%, medium 30%,
high 10%. Four queues.

Philly-derived: the first N jobs (by arrival) of a Gavel trace derived from Microsoft Philly
(`traces/philly_gavel/*.trace`), GPUs = its scale_factor, one pod per job; none declares a
plan, so none may split.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from volcano_global.jobspec import Communication
from volcano_global.simulation.workload import size_distribution
from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, LinkState, QueueState, Snapshot
from volcano_global.solver.traffic import allreduce_gbps

MODELS = ["H100", "A100"]


def kalos_stats(data_dir: Path) -> tuple[float, float, float]:
    with (data_dir / "traces" / "acme_cluster_summary.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["id"] == "Kalos")
    return float(row["avg_gpu_num"]), float(row["med_gpu_num"]), float(row["max_gpu"])


def big_cluster(
    name: str, rng: random.Random, model: str, utilisation: float, tors: int = 625
) -> ClusterCapacity:
    leaves = []
    for t in range(tors):
        hist = [0] * 9
        for _ in range(8):
            if rng.random() < utilisation:
                hist[rng.choice([2, 4, 6]) if rng.random() < 0.2 else 0] += 1
            else:
                hist[8] += 1
        leaves.append(
            Leaf(model, tuple(hist), (f"{name}-tor{t:03d}", f"{name}-spine{t // 25:02d}"))
        )
    return ClusterCapacity(name, tuple(leaves))


def links_for(names: list[str], rng: random.Random) -> tuple[LinkState, ...]:
    links = []
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            b = names[j]
            same_region = i // 4 == j // 4
            if not same_region and rng.random() < 0.5:
                continue
            capacity = rng.choice([1600.0, 3200.0]) if same_region else rng.choice([100.0, 400.0])
            links.append(LinkState(a, b, capacity, round(capacity * rng.uniform(0, 0.3), 1)))
    return tuple(links)


def llm_job(index: int, gpus: int, rng: random.Random, model: str) -> JobRequest:
    priority = rng.choices([0, 500, 1000], weights=[6, 3, 1])[0]
    queue = f"q{rng.randrange(4)}"
    if gpus < 8:
        return JobRequest(
            f"j{index}", pods=1, gpus_per_pod=gpus, gpu_model=model, priority=priority, queue=queue
        )
    pods = gpus // 8
    if gpus < 64:
        return JobRequest(
            f"j{index}", pods=pods, gpus_per_pod=8, gpu_model=model, priority=priority, queue=queue
        )
    pp = 1 if gpus <= 64 else 2 if gpus <= 128 else 4 if gpus <= 256 else 8
    params = {1: 7e9, 2: 13e9, 4: 70e9, 8: 175e9}[pp]
    plan = Communication(
        tensor_parallel=8,
        pipeline_parallel=pp,
        data_parallel=gpus // (8 * pp),
        gpus_per_pod=8,
        model_parameters=params,
        gradient_bytes_per_parameter=2,
        optimizer_sharding="zero1",
        target_step_time_seconds=rng.uniform(10, 30),
        tolerated_communication_share=rng.uniform(0.1, 0.3),
    )
    return JobRequest(
        f"j{index}",
        pods=pods,
        gpus_per_pod=8,
        gpu_model=model,
        unit_pods=pp,
        priority=priority,
        queue=queue,
        splittable=True,
        max_clusters=4,
        unit_tier=1 if rng.random() < 0.5 else None,
        allreduce_gbps=allreduce_gbps(plan),
    )


def llm_snapshot(
    *,
    seed: int,
    clusters: int,
    jobs: int,
    mean_gpus: float,
    utilisation: tuple[float, float],
    tors: int = 625,
) -> Snapshot:
    rng = random.Random(seed)
    _, dist = size_distribution(mean_gpus)
    names = [f"c{i:02d}" for i in range(clusters)]
    states = tuple(
        big_cluster(n, rng, MODELS[i % 2], rng.uniform(*utilisation), tors)
        for i, n in enumerate(names)
    )
    sizes = rng.choices([s for s, _ in dist], weights=[p for _, p in dist], k=jobs)
    requests = tuple(llm_job(i, s, rng, rng.choice(MODELS)) for i, s in enumerate(sizes))
    ordered = tuple(sorted(requests, key=lambda j: -j.priority))  # queue order: priority first
    queues = tuple(QueueState(f"q{i}") for i in range(4))
    return Snapshot(states, links_for(names, rng), ordered, queues)


def philly_snapshot(
    *, data_dir: Path, trace: str, jobs: int, clusters: int, nodes: int, seed: int
) -> Snapshot:
    rng = random.Random(seed)
    rows = []
    with (data_dir / "traces" / "philly_gavel" / f"{trace}.trace").open() as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            rows.append((float(parts[5]), int(parts[6])))
    rows.sort()
    requests = tuple(
        JobRequest(f"p{i}", pods=1, gpus_per_pod=g, gpu_model="V100", priority=0)
        for i, (_, g) in enumerate(rows[:jobs])
    )
    names = [f"c{i:02d}" for i in range(clusters)]
    states = tuple(
        big_cluster(n, rng, "V100", rng.uniform(0.5, 0.8), tors=nodes // 8) for n in names
    )
    return Snapshot(states, links_for(names, rng), requests, ())
