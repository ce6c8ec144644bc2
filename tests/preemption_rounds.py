"""Seeded random rounds for `preemption.preempt`: small fleets of leaves (two models, tiers),
running jobs whose pods sit on the leaves' busy nodes (some split over two clusters, with
link bandwidth), waiting gangs of every shape, and the rules varied. `decisions` is what a
round's evictions come to, in plain values (compared against `tests/solver_support/preemption_decisions.json`,
written by the code before `FreePools` (`free_pools.py`))."""

from __future__ import annotations

import random
from itertools import combinations

from volcano_global.solver import ClusterCapacity, Decision, JobDecision, Leaf, Policy, Snapshot
from volcano_global.solver.model import JobRequest, LinkBandwidth, LinkState, RunningJob
from volcano_global.solver.preemption import PREEMPT, RECLAIM, Eviction, Rules, Standing

MODELS = ("H100", "A100")


def round_of(seed: int) -> tuple[Snapshot, Decision, Rules, dict[str, Standing]]:
    rng = random.Random(seed)
    clusters, busy = _clusters(rng)
    names = [c.name for c in clusters]
    links = tuple(
        LinkState(a, b, rng.choice([50.0, 200.0, 400.0]), rng.choice([0.0, 20.0, 100.0]))
        for a, b in combinations(names, 2)
        if rng.random() < 0.8
    )
    running = _running(rng, busy)
    jobs = tuple(_waiting(rng, i, names) for i in range(rng.randint(2, 6)))
    admitted = {jobs[0].id} if rng.random() < 0.2 else set()
    decision = Decision(
        Policy.GREEDY, "FEASIBLE", tuple(JobDecision(j.id, j.id in admitted) for j in jobs)
    )
    rules = Rules(
        min_run_s=rng.choice([0.0, 600.0]),
        max_jobs=rng.choice([2, 4, 8]),
        max_gpus=rng.choice([64, 1024]),
        max_lost_gpu_hours=rng.choice([None, None, 50.0]),
        wait_weight=rng.choice([None, 1.0, 1.0]),
    )
    queues = {
        q: Standing(rng.randint(0, 200), rng.randint(0, 200), rng.random() < 0.8)
        for q in ("q0", "q1", "q2")
    }
    return Snapshot(clusters, links, jobs, (), running), decision, rules, queues


def _clusters(
    rng: random.Random,
) -> tuple[tuple[ClusterCapacity, ...], dict[str, list[list[object]]]]:
    """Clusters of leaves under spines, and per cluster its leaves' fully busy nodes
    ([leaf, model, nodes]) for the running jobs' pods."""
    clusters, busy = [], {}
    for c in range(rng.randint(2, 5)):
        name = f"c{c}"
        leaves, full = [], []
        count = rng.randint(1, 5)
        for i in range(count):
            model = rng.choice(MODELS)
            hist = [0] * 9
            for _ in range(rng.randint(2, 8)):
                hist[rng.choice([0, 0, 0, 0, 1, 2, 4, 6, 8])] += 1
            # a cluster without HyperNodes: one leaf, named after the cluster
            path = (f"{name}-t{i}", f"{name}-s{i // 2}") if count > 1 or rng.random() < 0.7 else ()
            leaves.append(Leaf(model, tuple(hist), path, node_gpus=8))
            full.append([path[0] if path else name, model, hist[0]])
        clusters.append(ClusterCapacity(name, tuple(leaves)))
        busy[name] = full
    return tuple(clusters), busy


def _running(rng: random.Random, busy: dict[str, list[list[object]]]) -> tuple[RunningJob, ...]:
    out = []
    names = sorted(busy)
    for i in range(rng.randint(3, 14)):
        where = rng.sample(names, 2 if len(names) > 1 and rng.random() < 0.2 else 1)
        gpus, pods = [], []
        for cluster in where:
            spots = [s for s in busy[cluster] if s[2]]  # type: ignore[operator]
            if not spots:
                continue
            spot = rng.choice(spots)
            n = rng.randint(1, spot[2])  # type: ignore[arg-type]
            spot[2] -= n  # type: ignore[operator]
            model = str(spot[1])
            pods.append((cluster, str(spot[0]), rng.choice(["", model]), n, 8))
            gpus.append((cluster, model, 8 * n))
        if not gpus:
            continue
        ran = rng.uniform(0, 4 * 3600)
        split = len(gpus) == 2
        out.append(
            RunningJob(
                f"r{i}",
                tuple(gpus),
                (LinkBandwidth(gpus[0][0], gpus[1][0], rng.choice([5.0, 30.0])),) if split else (),
                ends_in_s=rng.uniform(60, 8 * 3600),
                priority=rng.choice([0, 5, 10]),
                queue=rng.choice(["q0", "q1", "q2"]),
                preemptable=rng.random() < 0.9,
                run_s=ran,
                lost_s=rng.uniform(0, ran),
                pods=tuple(pods),
                restore_s=rng.choice([0.0, 300.0]),
            )
        )
    return tuple(out)


def _waiting(rng: random.Random, i: int, names: list[str]) -> JobRequest:
    per_pod = rng.choice([8, 8, 4])
    unit = rng.choice([1, 2])
    units = rng.randint(1, 4)
    splittable = rng.random() < 0.4
    return JobRequest(
        f"w{i}",
        pods=unit * units,
        gpus_per_pod=per_pod,
        gpu_model=rng.choice([*MODELS, None]),
        unit_pods=unit,
        priority=rng.choice([0, 5, 10, 15]),
        queue=rng.choice(["q0", "q1", "q2"]),
        splittable=splittable,
        max_clusters=rng.choice([2, 3]) if splittable else 1,
        unit_tier=1 if rng.random() < 0.3 else None,
        share_tier=2 if rng.random() < 0.15 else None,
        allreduce_gbps=rng.choice([0.0, 10.0, 60.0]),
        allowed_clusters=tuple(rng.sample(names, 1)) if rng.random() < 0.1 else None,
        may_evict_for=frozenset({PREEMPT, RECLAIM})
        if rng.random() < 0.85
        else frozenset({PREEMPT}),
    )


def decisions(evictions: list[Eviction]) -> list[object]:
    """A round's evictions as plain values (JSON's lists)."""
    return [
        [
            e.preemptor,
            [v.id for v in e.victims],
            [
                [s.cluster, s.units, s.pods, s.gpus, [list(d) for d in s.domains]]
                for s in e.placement.shares
            ],
            [[r.a, r.b, r.gbps] for r in e.placement.reservations],
            e.kind,
            e.reason,
        ]
        for e in evictions
    ]
