"""Snapshot builders for the solver tests and the benchmark's small cases."""

from __future__ import annotations

import random

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, LinkState, QueueState, Snapshot


def cluster(
    name: str, nodes: int, *, model: str = "H100", tors: int = 1, free: int = 8
) -> ClusterCapacity:
    """`nodes` nodes with `free` free GPUs each, spread evenly over `tors` ToR domains under
    one spine."""
    per = [nodes // tors + (1 if t < nodes % tors else 0) for t in range(tors)]
    return ClusterCapacity(
        name,
        tuple(
            Leaf(
                model,
                tuple(count if v == free else 0 for v in range(9)),
                (f"{name}-tor{t}", f"{name}-spine"),
                node_gpus=8,
            )
            for t, count in enumerate(per)
        ),
    )


def job(job_id: str, pods: int, **kw) -> JobRequest:  # type: ignore[no-untyped-def]
    kw.setdefault("gpus_per_pod", 8)
    kw.setdefault("gpu_model", "H100")
    return JobRequest(job_id, pods=pods, **kw)


def random_snapshot(seed: int) -> Snapshot:
    rng = random.Random(seed)
    models = ["H100", "A100"]
    clusters = []
    for c in range(rng.randint(2, 5)):
        leaves = []
        for t in range(rng.randint(1, 6)):
            hist = [0] * 9
            for _ in range(rng.randint(1, 8)):
                hist[rng.choice([0, 2, 4, 6, 8, 8, 8])] += 1
            spine = f"c{c}-s{t % 2}"
            leaves.append(
                Leaf(rng.choice(models) if c % 2 else "H100", tuple(hist), (f"c{c}-t{t}", spine))
            )
        clusters.append(ClusterCapacity(f"c{c}", tuple(leaves)))
    names = [c.name for c in clusters]
    links = [
        LinkState(a, b, rng.choice([50.0, 100.0, 400.0]), rng.choice([0.0, 0.0, 25.0]))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if rng.random() < 0.7
    ]
    jobs = []
    for j in range(rng.randint(1, 12)):
        g = rng.choice([1, 2, 4, 8, 8])
        unit = rng.choice([1, 2, 4])
        units = rng.randint(1, 8)
        splittable = rng.random() < 0.6
        jobs.append(
            JobRequest(
                f"j{j}",
                pods=unit * units,
                gpus_per_pod=g,
                gpu_model=rng.choice(models),
                unit_pods=unit,
                priority=rng.choice([0, 100, 1000]),
                queue=rng.choice(["a", "b"]),
                splittable=splittable,
                max_clusters=rng.randint(2, 3) if splittable else 1,
                min_share_units=rng.choice([1, 1, 2]),
                unit_tier=rng.choice([None, None, 1, 2]),
                share_tier=rng.choice([None, None, None, 2]),
                allreduce_gbps=rng.choice([0.0, 20.0, 80.0, 300.0]),
                min_units=rng.choice([0, 0, 0, max(units // 2, 1)]),
            )
        )
    queues = [
        QueueState("a", rng.choice([None, 64, 256]), rng.choice([0, 16])),
        QueueState("b", None, 0),
    ]
    return Snapshot(tuple(clusters), tuple(links), tuple(jobs), tuple(queues))
