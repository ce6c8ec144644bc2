"""Step 1c (`solver.long_work`, issue 34 item 3): a job expected by its runningEstimate to run
for hours waits while long work holds its share of the fleet and a shorter job of its
priority waits; never without an estimate, never when only long work waits."""

from __future__ import annotations

from dataclasses import replace

from volcano_global.solver import JobRequest, Policy, RunningJob
from volcano_global.solver.durations import DurationModel
from volcano_global.solver.long_work import Estimate, LongWork, keep_room
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Status, plan_round

from .test_round_plan import HOUR, NOW, cluster, gang, running

FLEET = 1000
RULE = LongWork(long_s=2 * HOUR, share=0.5)


def job(job_id: str, gpus: int = 64, priority: int = 0) -> JobRequest:
    return JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, priority=priority)


def holding(gpus: int, ends_in_s: float) -> RunningJob:
    return RunningJob("r", (("a", "H100", gpus),), ends_in_s=ends_in_s)


def kept(
    waiting: list[JobRequest],
    estimates: dict[str, float],
    running: tuple[RunningJob, ...] = (),
    durations: DurationModel | None = None,
    free_nodes: int = 64,
) -> tuple[list[str], dict[str, str]]:
    jobs, held = keep_room(
        waiting,
        {k: Estimate(v, "q") for k, v in estimates.items()},
        running=running,
        clusters=(cluster("a", free_nodes, 0),),
        fleet_gpus=FLEET,
        durations=durations or DurationModel(),
        options=RULE,
    )
    return [j.id for j in jobs], held


def test_a_long_job_waits_while_long_work_holds_its_share_and_short_work_waits() -> None:
    busy = (holding(448, ends_in_s=3 * HOUR),)
    ids, held = kept([job("long"), job("short")], {"long": 4 * HOUR}, busy)
    assert ids == ["short"]
    assert held["long"].startswith("long work: expected to run 4.0 h")
    assert "hold 448 of the fleet's 1,000 GPUs and may hold 50%" in held["long"]
    # Within the share it starts; the GPUs of long work ending soon do not count.
    assert kept([job("long"), job("short")], {"long": 4 * HOUR}, (holding(436, 3 * HOUR),))[0] == [
        "long",
        "short",
    ]
    assert kept([job("long"), job("short")], {"long": 4 * HOUR}, (holding(448, 600.0),))[0] == [
        "long",
        "short",
    ]


def test_a_short_job_that_cannot_start_now_holds_nothing_back() -> None:
    """Review: a 64-GPU short job with 32 GPUs free kept the 16-GPU long job (and the GPUs)
    waiting."""
    busy = (holding(496, ends_in_s=3 * HOUR),)
    waiting = [job("long", 16), job("short", 64)]
    assert kept(waiting, {"long": 4 * HOUR}, busy, free_nodes=4) == (["long", "short"], {})
    assert kept(waiting, {"long": 4 * HOUR}, busy, free_nodes=8)[0] == ["short"]


def test_a_long_job_wider_than_the_share_goes_when_no_long_work_holds_anything() -> None:
    ids, held = kept([job("wide", 640), job("short")], {"wide": 4 * HOUR})
    assert ids == ["wide", "short"] and held == {}
    busy = (holding(8, ends_in_s=3 * HOUR),)
    assert kept([job("wide", 640), job("short")], {"wide": 4 * HOUR}, busy)[0] == ["short"]


def test_the_long_jobs_let_through_this_round_count_against_the_share() -> None:
    waiting = [job("l1", 256), job("l2", 256), job("short")]
    ids, held = kept(waiting, {"l1": 3 * HOUR, "l2": 3 * HOUR})
    assert ids == ["l1", "short"] and set(held) == {"l2"}


def test_never_without_an_estimate_when_only_long_work_waits_or_above_short_work() -> None:
    busy = (holding(900, ends_in_s=3 * HOUR),)
    assert kept([job("long"), job("short")], {}, busy) == (["long", "short"], {})
    assert kept([job("long"), job("l2")], {"long": 4 * HOUR, "l2": 3 * HOUR}, busy)[1] == {}
    urgent = [job("long", priority=10), job("short")]
    assert kept(urgent, {"long": 4 * HOUR}, busy) == (["long", "short"], {})


def test_an_estimate_is_corrected_by_how_its_queue_s_estimates_held() -> None:
    """A queue whose jobs ran 3x their estimates: a 50-min estimate is 2.5 h of work."""
    durations = DurationModel()
    for _ in range(30):
        durations.observe(64, 3 * 1800.0, estimate=1800.0, queue="q")
    busy = (holding(900, ends_in_s=3 * HOUR),)
    assert kept([job("long"), job("short")], {"long": 3000.0}, busy)[0] == ["long", "short"]
    ids, held = kept([job("long"), job("short")], {"long": 3000.0}, busy, durations)
    assert ids == ["short"] and "expected to run 2.5 h" in held["long"]


def test_the_round_starts_the_short_job_and_tells_the_long_one_why() -> None:
    long_job, short = gang("long", 16), gang("short", 16)
    data = RoundInput(
        NOW,
        (cluster("a", 4, 4),),
        waiting=(replace(long_job, estimate_s=4 * HOUR), short),
        running=(running("r1", 32, ends_in_s=3 * HOUR),),
        fleet_gpus=64,
    )
    plan = plan_round(data, Policy.BACKFILL, RoundOptions(long_work=RULE))
    assert [d.job_id for d in plan.starts] == ["short"]
    told = plan.outcomes["long"]
    assert told.status is Status.WAITING and told.reason.startswith("long work:")
    assert "hold 32 of the fleet's 64 GPUs" in told.reason
    # Without the rule both start.
    assert {d.job_id for d in plan_round(data, Policy.BACKFILL).starts} == {"long", "short"}
