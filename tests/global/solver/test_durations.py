"""The expected remaining time of a running job (issue 34): the finished jobs' mean residual
life in the body, a fitted tail past it (it grows as a job outlives its peers), and a user's
runningEstimate corrected by how the queue's jobs met theirs - never 0 for an overrun job."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, Policy, RunningJob
from volcano_global.solver.durations import DEFAULT_S, DurationModel
from volcano_global.solver.round_plan import RoundInput, Status, Waiting, plan_round

# Twenty jobs of 8 GPUs: 100, 200, ..., 2,000 s.
TWENTY = [(8, 100.0 * i) for i in range(1, 21)]


def test_the_residual_life_matches_a_hand_computation() -> None:
    model = DurationModel(TWENTY)
    # Body: after 1,000 s the ten jobs of 1,100..2,000 s can still run: mean 1,550, 550 left.
    assert model.remaining(8, 1000.0) == pytest.approx(550.0)
    # Tail: the 5 longest (1,600..2,000 s) above u = 1,500. Mean excess 1,800 - 1,500 = 300;
    # Hill's gamma = mean ln(x / 1,500) = (ln 16/15 + ln 17/15 + ... + ln 20/15) / 5.
    gamma = sum(math.log(x / 15) for x in (16, 17, 18, 19, 20)) / 5
    assert gamma == pytest.approx(0.17922, abs=1e-5)
    slope = gamma / (1 - gamma)  # Pareto: E[D - a | D > a] = a * gamma / (1 - gamma)
    # At u five samples are longer: theirs, 300 s. At 1,600 s only four are: the samples'
    # 250 s and the exponential's 300 s are below the Pareto's 349 s.
    assert model.remaining(8, 1500.0) == pytest.approx(300.0)
    assert model.remaining(8, 1600.0) == pytest.approx(1600.0 * slope)
    assert model.remaining(8, 1600.0) == pytest.approx(349.4, abs=0.1)
    # Past every sample: the Pareto tail alone, 655 s at 3,000 s.
    assert model.remaining(8, 3000.0) == pytest.approx(3000.0 * slope)


def test_a_job_older_than_every_sample_is_expected_to_run_longer_the_older_it_is() -> None:
    model = DurationModel(TWENTY)
    ages = [2_000.0, 4_000.0, 8_000.0, 16_000.0]
    left = [model.remaining(8, a) for a in ages]
    assert all(x > 0 for x in left)
    assert left == sorted(left) and left[-1] > 2 * left[1]
    # Before the tail model, every one of them was "expected to end in" the class mean, 1,050 s.
    assert left[-1] > 1050.0 * 3


def test_near_the_longest_sample_the_tail_keeps_the_remaining_time_honest() -> None:
    # The samples alone would say 10 s left at 1,990 s (only the 2,000-s job is longer).
    model = DurationModel(TWENTY)
    assert model.remaining(8, 1990.0) > 300.0


def test_light_tails_keep_the_exponential_floor() -> None:
    # Equal durations but one: the Hill index is ~0, the mean excess stands.
    model = DurationModel([(8, 100.0)] * 19 + [(8, 200.0)])
    # u = 100 (the 15th sample), the five longest excess it by (0 * 4 + 100) / 5 = 20 s.
    assert model.remaining(8, 500.0) == pytest.approx(max(20.0, 500.0 * _slope([100] * 4 + [200])))
    assert model.remaining(8, 500.0) > 0


def _slope(top: list[float]) -> float:
    gamma = min(sum(math.log(x / 100) for x in top) / len(top), 0.5)
    return gamma / (1 - gamma)


def test_an_overrun_estimate_is_not_ending_in_zero_seconds() -> None:
    model = DurationModel(TWENTY)
    assert model.remaining(8, 50.0, estimate=100.0) == 50.0  # within it: taken as given
    overrun = model.remaining(8, 3000.0, estimate=100.0)
    assert overrun == model.remaining(8, 3000.0) > 0  # past it: the class's tail
    # With nothing learnt at all, what is left of the default duration; past it, the default
    # again (memoryless).
    assert DurationModel().remaining(8, 500.0, estimate=100.0) == DEFAULT_S - 500.0
    assert DurationModel().remaining(8, 5000.0, estimate=100.0) == DEFAULT_S


def test_the_estimate_error_is_learnt_per_queue() -> None:
    model = DurationModel(TWENTY)
    for _ in range(5):
        model.observe(8, 200.0, estimate=100.0, queue="hopeful")  # ran twice its estimate
        model.observe(8, 100.0, estimate=100.0, queue="exact")
    assert model.estimate_error("hopeful") == 2.0
    assert model.estimate_error("exact") == 1.0
    assert model.remaining(8, 0.0, estimate=300.0, queue="hopeful") == pytest.approx(600.0)
    assert model.remaining(8, 100.0, estimate=300.0, queue="exact") == pytest.approx(200.0)
    # An "exact" job past its estimate: its queue's ratios are all 1, nothing to fit beyond
    # them, so memoryless with their mean - one more estimate, not 0.
    assert model.remaining(8, 450.0, estimate=300.0, queue="exact") == pytest.approx(300.0)
    # A queue with too few jobs of its own borrows the fleet's ratios (1 and 2, median 2).
    assert model.estimate_error("new") == 2.0
    assert DurationModel(TWENTY).estimate_error("new") is None


NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def test_a_hold_promises_its_start_as_a_time() -> None:
    # x: 8 nodes, 4 of them busy until t = 100 s; the due gang needs all 8: a hold at 100 s.
    x = ClusterCapacity("x", (Leaf("H100", (4, 0, 0, 0, 0, 0, 0, 0, 4), ("x",), node_gpus=8),))
    gang = JobRequest("gang", pods=8, gpus_per_pod=8, gpu_model="H100", due=True)
    data = RoundInput(
        NOW,
        (x,),
        waiting=(Waiting(gang, NOW - timedelta(hours=1), 600.0),),
        running=(RunningJob("r", (("x", "H100", 32),), ends_in_s=100.0),),
    )
    for policy in (Policy.BACKFILL, Policy.CPSAT):
        held = plan_round(data, policy).outcomes["gang"]
        assert held.status is Status.RESERVED
        assert held.at == NOW + timedelta(seconds=100)
