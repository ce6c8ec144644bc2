"""The planned policies by hand: the order that serves short expected work first, the durations
it learns, and reservations that are honoured and that backfill may use."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from tests.solver_support.checker import check
from tests.solver_support.instances import cluster, job
from volcano_global.solver import (
    ClusterCapacity,
    Leaf,
    LinkState,
    Policy,
    RunningJob,
    Snapshot,
    SolveOptions,
    planning,
    solve,
)
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.queue_order import Candidate, fair_order

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OPTIONS = SolveOptions(time_limit_s=2.0)
PLANNED = [Policy.CPSAT, Policy.BACKFILL]


def waiting(key: str, gpus: int, *, minute: int = 0, estimate: float | None = None, now: int = 0):  # type: ignore[no-untyped-def]
    return planning.waiting(
        key,
        queue="q",
        priority=0,
        gpus=gpus,
        submitted_at=T0 + timedelta(minutes=minute),
        estimate_s=estimate,
        now=T0 + timedelta(minutes=now),
        durations=DurationModel(),
        reserve_after_s=1800,
    )


def test_least_expected_service_goes_first_and_a_due_job_before_it() -> None:
    jobs = [
        waiting("big-old", 64, minute=0, now=20),
        waiting("small-new", 8, minute=10, now=20),
        waiting("estimated", 64, minute=5, estimate=60, now=20),  # 64 x 60 < 8 x 3600
    ]
    planned = [c.key for c in planning.order(Policy.CPSAT, jobs, held={}, weights={})]
    assert planned == ["estimated", "small-new", "big-old"]
    # Baselines keep submission order.
    fifo = [c.key for c in planning.order(Policy.FIRST_FIT, jobs, held={}, weights={})]
    assert fifo == ["big-old", "estimated", "small-new"]
    # After 30 minutes of waiting big-old is owed a reservation: first in its queue.
    late = [
        waiting("big-old", 64, minute=0, now=31),
        waiting("small-new", 8, minute=10, now=31),
    ]
    assert [c.due for c in late] == [True, False]
    assert [c.key for c in planning.order(Policy.CPSAT, late, held={}, weights={})] == [
        "big-old",
        "small-new",
    ]


def test_fair_share_still_rules_over_short_work() -> None:
    jobs = [
        Candidate("a-long", "a", 0, 8, T0, service=10_000.0),
        Candidate("b-short", "b", 0, 8, T0, service=1.0),
    ]
    order = fair_order(jobs, held={"b": 64}, weights={"a": 1, "b": 1}, by_service=True)
    assert [c.key for c in order] == ["a-long", "b-short"]


def test_durations_by_hand() -> None:
    # Nine jobs of 10 s and one of 1,000 s: mean 109 s. Gittins at zero attained service:
    # min over d of E[min(D, d)] / P(D <= d) = (10 at d = 10: 10 / 0.9 = 11.1 s).
    model = DurationModel([(8, 10.0)] * 9 + [(8, 1000.0)])
    assert model.remaining(8, 0.0) == pytest.approx(109.0)
    assert model.service(8) == pytest.approx(8 * 10 / 0.9)
    assert model.service(8, estimate=50.0) == 400.0
    # After 10 s only the long job can still be running: 990 s left.
    assert model.remaining(8, 10.0) == pytest.approx(990.0)
    assert model.remaining(8, 5.0, estimate=60.0) == 55.0
    # Another size class with too few samples of its own borrows the fleet's distribution.
    assert model.remaining(512, 0.0) == pytest.approx(109.0)


def test_backfill_reads_the_three_quarter_run_time() -> None:
    # Twenty jobs of 1..20 s: 75% of them end within 16 s (the 16th of 20), the run time a job
    # must be likely to end within to use reserved GPUs; a user's estimate is taken as given.
    model = DurationModel([(8, float(s)) for s in range(1, 21)])
    assert model.likely_within(8) == 16.0
    assert model.likely_within(8, estimate=30.0) == 30.0


def partly_busy(name: str, free: int, busy: int) -> ClusterCapacity:
    """One ToR of 8-GPU nodes, `free` of them free and `busy` fully used."""
    return ClusterCapacity(
        name,
        (Leaf("H100", (busy, 0, 0, 0, 0, 0, 0, 0, free), (f"{name}-tor",), node_gpus=8),),
    )


def held_fleet(*jobs_):  # type: ignore[no-untyped-def]
    """x: 8 nodes, 4 of them busy until t = 100 s; y: 2 free nodes."""
    return Snapshot(
        clusters=(partly_busy("x", 4, 4), cluster("y", 2)),
        jobs=tuple(jobs_),
        running=(RunningJob("r", (("x", "H100", 32),), ends_in_s=100.0),),
    )


@pytest.mark.parametrize("policy", PLANNED)
def test_a_reservation_is_honoured(policy: Policy) -> None:
    # The due gang needs all 8 nodes of x, free at t = 100. A long job that would still run
    # then may not take x's free nodes, and y is too small for it.
    snapshot = held_fleet(
        job("gang", 8, due=True, estimate_s=600.0), job("long", 4, estimate_s=1000.0)
    )
    decision = solve(snapshot, policy, OPTIONS)
    assert decision.admitted == ()
    assert "reserved: 64 GPUs in x expected free in 100 s" in (decision.job("gang").reason or "")
    # Without the plan, the greedy splitter starts the long job at once (and the gang waits
    # for it to end).
    assert solve(snapshot, Policy.GREEDY).job("long").admitted


@pytest.mark.parametrize("policy", PLANNED)
def test_backfill_uses_a_reservation_it_leaves_in_time(policy: Policy) -> None:
    snapshot = held_fleet(
        job("gang", 8, due=True, estimate_s=600.0),
        job("short", 4, estimate_s=60.0),  # ends before t = 100
        job("long", 2, estimate_s=1000.0),  # fits in y, outside the reservation
    )
    decision = solve(snapshot, policy, OPTIONS)
    assert {d.job_id: d.clusters for d in decision.admitted} == {
        "short": ("x",),
        "long": ("y",),
    }
    assert check(snapshot, decision) == []


@pytest.mark.parametrize("policy", PLANNED)
@pytest.mark.parametrize(("pair_gbps", "admitted"), [(100.0, False), (40.0, True)])
def test_a_split_reservation_holds_the_link(
    policy: Policy, pair_gbps: float, admitted: bool
) -> None:
    # The gang needs 3 units of 4 nodes in at most 2 clusters with 150 Gbps between them. Now
    # x has 6 free nodes (1 unit) and y 6 (1 unit); at t = 100 x has 10 (2 units): the hold is
    # 64 GPUs in x and 32 in y, with 2 nodes spare in each and 200 - 150 = 50 Gbps on x-y.
    # A split job that outlasts t = 100 fits the spare nodes (2 + 2 pods) but may take no more
    # than those 50 Gbps.
    snapshot = Snapshot(
        clusters=(partly_busy("x", 6, 4), cluster("y", 6)),
        links=(LinkState("x", "y", 200),),
        jobs=(
            job(
                "gang",
                12,
                due=True,
                unit_pods=4,
                splittable=True,
                max_clusters=2,
                allreduce_gbps=150,
                estimate_s=600.0,
            ),
            job(
                "pair",
                4,
                unit_pods=2,
                splittable=True,
                max_clusters=2,
                allreduce_gbps=pair_gbps,
                estimate_s=1000.0,
            ),
        ),
        running=(RunningJob("r", (("x", "H100", 32),), ends_in_s=100.0),),
    )
    decision = solve(snapshot, policy, OPTIONS)
    assert "reserved: 64 GPUs in x, 32 GPUs in y expected free in 100 s" in (
        decision.job("gang").reason or ""
    )
    pair = decision.job("pair")
    assert pair.admitted is admitted
    if admitted:
        assert sorted(s.pods for s in pair.shares) == [2, 2]
        assert check(snapshot, decision) == []


def _gang_reservable_in_x_or_y() -> Snapshot:
    """The gang could be reserved in x (free at 100) or in y (free at 120); the long job may
    only run in x (allowed_clusters)."""
    return Snapshot(
        clusters=(partly_busy("x", 4, 4), partly_busy("y", 4, 4)),
        jobs=(
            job("gang", 8, due=True, estimate_s=600.0),
            job("long", 4, estimate_s=1000.0, allowed_clusters=("x",)),
        ),
        running=(
            RunningJob("rx", (("x", "H100", 32),), ends_in_s=100.0),
            RunningJob("ry", (("y", "H100", 32),), ends_in_s=120.0),
        ),
    )


def test_a_round_whose_warm_start_used_its_time_returns_the_warm_start() -> None:
    # The same instance as below: with time for a search CP-SAT reserves y and starts "long";
    # with none left after the warm start it returns the heuristic's plan (reserve x, start
    # nothing) rather than overrun the round building a model, and proves no bound.
    snapshot = _gang_reservable_in_x_or_y()
    rushed = solve(snapshot, Policy.CPSAT, SolveOptions(time_limit_s=1e-6))
    assert rushed.status == "SKIPPED+GREEDY"
    assert rushed.admitted == ()
    assert "reserved: 64 GPUs in x expected free in 100 s" in (rushed.job("gang").reason or "")
    assert math.isnan(rushed.gap)
    assert [d.job_id for d in solve(snapshot, Policy.CPSAT, OPTIONS).admitted] == ["long"]


def test_cpsat_chooses_the_reservation_with_what_starts_now() -> None:
    # The heuristic takes the soonest reservation, x, and the long job waits; CP-SAT reserves
    # y, 20 s later, and starts the long job in x now.
    snapshot = _gang_reservable_in_x_or_y()
    heuristic = solve(snapshot, Policy.BACKFILL, OPTIONS)
    assert heuristic.admitted == ()
    assert "reserved: 64 GPUs in x expected free in 100 s" in (heuristic.job("gang").reason or "")
    cpsat = solve(snapshot, Policy.CPSAT, OPTIONS)
    assert [d.job_id for d in cpsat.admitted] == ["long"]
    assert "reserved: 64 GPUs in y expected free in 120 s" in (cpsat.job("gang").reason or "")
    assert check(snapshot, cpsat) == []


@pytest.mark.parametrize("policy", PLANNED)
def test_no_reservation_where_the_shape_never_fits(policy: Policy) -> None:
    # x has 64 free GPUs, but in ToRs of 4 nodes: a unit of 8 pods that must stay under one
    # ToR never fits there, however much is free. The reservation goes to y's ToR of 8 nodes,
    # half busy until t = 100. (The cap needs the nodes' size: the simulator knows it.)
    snapshot = Snapshot(
        clusters=(cluster("x", 8, tors=2), partly_busy("y", 4, 4)),
        jobs=(job("gang", 8, unit_pods=8, unit_tier=1, due=True, estimate_s=600.0),),
        running=(RunningJob("ry", (("y", "H100", 32),), ends_in_s=100.0),),
    )
    decision = solve(snapshot, policy, OPTIONS)
    assert not decision.job("gang").admitted
    assert "reserved: 64 GPUs in y expected free in 100 s" in (decision.job("gang").reason or "")


@pytest.mark.parametrize("policy", PLANNED)
def test_an_elastic_job_starts_at_the_width_that_fits(policy: Policy) -> None:
    # 4 data-parallel replicas of 2 pods, at least 2 of them; 6 nodes free: 3 replicas start.
    elastic = job("dp", 8, unit_pods=2, min_units=2)
    decision = solve(Snapshot(clusters=(cluster("x", 6),), jobs=(elastic,)), policy, OPTIONS)
    assert [(s.cluster, s.units, s.pods) for s in decision.job("dp").shares] == [("x", 3, 6)]
    # Split over two clusters it takes every replica there is room for, and not below its
    # fewest: with 2 + 1 nodes free (one replica) it waits.
    split = job("dp", 8, unit_pods=2, min_units=2, splittable=True, max_clusters=2)
    two = Snapshot(
        clusters=(cluster("x", 2), cluster("y", 5)),
        links=(LinkState("x", "y", 400),),
        jobs=(split,),
    )
    assert sorted((s.cluster, s.units) for s in solve(two, policy, OPTIONS).job("dp").shares) == [
        ("x", 1),
        ("y", 2),
    ]
    tight = Snapshot(clusters=(cluster("x", 2), cluster("y", 1)), jobs=(elastic,))
    assert not solve(tight, policy, OPTIONS).job("dp").admitted
    # A rigid gang of the same shape waits for all 8 nodes.
    rigid = Snapshot(clusters=(cluster("x", 6),), jobs=(job("dp", 8, unit_pods=2),))
    assert not solve(rigid, policy, OPTIONS).job("dp").admitted


def test_cpsat_keeps_a_better_plan_than_its_warm_start() -> None:
    # Two due gangs of 16 GPUs; X frees 8 GPUs at 100 s, Y at 200 s; B may only run in X. The
    # warm start reserves X for A (its soonest) and starts S; B gets no reservation. CP-SAT
    # reserves Y for A and X for B (two reservations outweigh S starting now), and its answer
    # is kept: the fallback compares by the model's whole objective, reservations included.
    snapshot = Snapshot(
        clusters=(partly_busy("X", 1, 1), partly_busy("Y", 1, 1)),
        running=(
            RunningJob("r1", (("X", "H100", 8),), ends_in_s=100.0),
            RunningJob("r2", (("Y", "H100", 8),), ends_in_s=200.0),
        ),
        jobs=(
            job("A", 2, due=True, estimate_s=1e4),
            job("B", 2, due=True, estimate_s=1e4, allowed_clusters=("X",)),
            job("S", 1, estimate_s=1e4),
        ),
    )
    heuristic = solve(snapshot, Policy.BACKFILL, OPTIONS)
    assert [d.job_id for d in heuristic.admitted] == ["S"]
    assert [job_id for job_id, _ in heuristic.reserved] == ["A"]
    cpsat = solve(snapshot, Policy.CPSAT, OPTIONS)
    assert not cpsat.status.endswith("GREEDY")
    assert cpsat.admitted == ()
    assert dict(cpsat.reserved) == {
        "A": "reserved: 16 GPUs in Y expected free in 200 s",
        "B": "reserved: 16 GPUs in X expected free in 100 s",
    }
    assert cpsat.gap == 0
