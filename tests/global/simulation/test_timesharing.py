"""Time-sharing in the simulator, hand-checked: a queue's long gang yields to a short one of its
class after its quantum, resumes from its checkpoint, and keeps what it received; demotions
are counted in the result."""

from __future__ import annotations

import pydantic
import pytest

from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import Policy

HOUR = 3600.0


def fleet(**queue: object) -> Scenario:
    spec = {"nodeGroups": [{"count": 4, "gpusPerNode": 8, "gpuModel": "H100"}]}
    return Scenario.model_validate(
        {"clusters": [{"name": "c0", "spec": spec}], "queues": [{"name": "q", **queue}]}
    )


SHARING = {"timeSharing": True, "timeSharingQuantum": "1h"}
# LONG holds the whole cluster for 3 h from t = 0; SHORT wants it for 10 minutes at 2 h.
LONG = TraceJob("long", 0.0, pods=4, gpus_per_pod=8, duration_s=3 * HOUR, queue="q")
SHORT = TraceJob("short", 2 * HOUR, pods=4, gpus_per_pod=8, duration_s=600.0, queue="q")


def run(world: Scenario, jobs: list[TraceJob] = [LONG, SHORT], **options: object):  # type: ignore[no-untyped-def]  # noqa: B006
    options = {"checkpoint_s": 600.0, **options}
    sim = Simulation(world, jobs, Policy.GREEDY, SimOptions(**options))  # type: ignore[arg-type]
    result = sim.run()
    return {r.job.id: (r.start, r.finish) for r in result.records}, result, sim


@pytest.mark.parametrize("policy", [Policy.GREEDY, Policy.FIRST_FIT, Policy.BACKFILL])
def test_the_long_gang_yields_after_its_quantum_and_resumes_from_its_checkpoint(
    policy: Policy,
) -> None:
    sim = Simulation(fleet(**SHARING), [LONG, SHORT], policy, SimOptions(checkpoint_s=600.0))
    result = sim.run()
    times = {r.job.id: (r.start, r.finish) for r in result.records}
    # At 2 h LONG has run its quantum and just checkpointed (every 600 s): it yields, losing
    # nothing; SHORT runs 10 minutes; LONG resumes at 2 h 10 with its last hour of work.
    assert times == {"short": (7200.0, 7800.0), "long": (7800.0, 11400.0)}
    (long,) = [r for r in result.records if r.job.id == "long"]
    assert (long.demoted, long.preempted, long.demoted_gpu_s) == (1, 1, 0.0)
    assert (result.demotions, result.demoted_gpu_hours) == (1, 0.0)
    assert result.evictions == [(7200.0, "long", "short")]
    assert sim.served == {"long": 32 * 2 * HOUR}  # what its first run received, kept


def test_a_queue_that_does_not_opt_in_runs_first_come_first_served() -> None:
    times, result, _ = run(fleet())
    assert times == {"long": (0.0, 3 * HOUR), "short": (3 * HOUR, 3 * HOUR + 600.0)}
    assert result.demotions == 0


def test_a_gang_does_not_yield_before_its_quantum() -> None:
    times, result, _ = run(fleet(timeSharing=True, timeSharingQuantum="3h"))
    assert result.demotions == 0 and times["short"] == (3 * HOUR, 3 * HOUR + 600.0)


def test_a_gang_that_would_lose_more_than_the_limit_does_not_yield() -> None:
    # Checkpoints every 50 minutes: at 2 h it would lose 20 minutes, more than 300 s; no other
    # round comes before it ends (the simulator runs rounds at arrivals and ends).
    times, result, _ = run(fleet(**SHARING), checkpoint_s=3000.0)
    assert result.demotions == 0 and times["long"] == (0.0, 3 * HOUR)


def test_the_demoted_gang_waits_behind_less_served_work_of_its_class() -> None:
    # A second short job arrives while the first runs: it goes before the demoted LONG, which
    # arrived first but has received 64 GPU-hours.
    other = TraceJob("other", 2 * HOUR + 60, pods=4, gpus_per_pod=8, duration_s=600.0, queue="q")
    times, _, _ = run(fleet(**SHARING), [LONG, SHORT, other])
    assert times["other"] == (7800.0, 8400.0)
    assert times["long"] == (8400.0, 12000.0)


def test_a_scenario_with_an_unreadable_quantum_is_refused_naming_it() -> None:
    with pytest.raises(
        pydantic.ValidationError, match=r"queues.0.timeSharingQuantum\n.*is not a duration"
    ):
        fleet(timeSharing=True, timeSharingQuantum="an hour")
