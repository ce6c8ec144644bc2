"""A job that waits for the cluster holding its data, once owed a reservation, has it there
(step 1b narrows it to the holders before the solver plans reservations): smaller jobs
backfill the holder only where they are expected to end before its reserved start (issue 33,
docs/benchmarks.md 3e "later, round 3")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, LinkState, Policy, RunningJob
from volcano_global.solver.data import DataNeeds, DatasetNeed
from volcano_global.solver.round_plan import RoundInput, Status, Waiting, plan_round

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TIB = 2**40
# west holds the data: 6 nodes of 8 GPUs, 2 free now, 2 more at 30 min, the last 2 at 1 h.
WEST = ClusterCapacity("west", (Leaf("H100", (4,) + (0,) * 7 + (2,), ("west",), node_gpus=8),))
EAST = ClusterCapacity("east", (Leaf("H100", (0,) * 8 + (6,), ("east",), node_gpus=8),))
THIN = LinkState("east", "west", 10.0)  # 100 TiB over it: about a day, so the big job waits
RUNNING = (
    RunningJob("r1", (("west", "H100", 16),), ends_in_s=1800.0, name="r1"),
    RunningJob("r2", (("west", "H100", 16),), ends_in_s=3600.0, name="r2"),
)


def job(job_id: str, gpus: int, waited_s: float, run_s: float) -> Waiting:
    request = JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model="H100")
    return Waiting(request, NOW - timedelta(seconds=waited_s), estimate_s=run_s)


def in_west(size_tib: float, name: str) -> DataNeeds:
    return DataNeeds(datasets=(DatasetNeed(name, int(size_tib * TIB), ("west",)),))


def test_a_big_job_waiting_for_its_holder_is_reserved_there_and_only_short_work_backfills() -> None:
    # big (48 GPUs, waited 2 h) reads 100 TiB held only in west: west has room for it in 1 h.
    # long (16 GPUs, 2 h) would fit west now but run past that; short (16 GPUs, 10 min) ends
    # before it.
    data = RoundInput(
        NOW,
        (EAST, WEST),
        (THIN,),
        waiting=(
            job("big", 48, 7200.0, 7200.0),
            job("long", 16, 300.0, 7200.0),
            job("short", 16, 300.0, 600.0),
        ),
        running=RUNNING,
        data={
            "big": in_west(100, "corpus-big"),
            "long": in_west(100, "corpus-long"),
            "short": in_west(100, "corpus-short"),
        },
    )
    plan = plan_round(data, Policy.CPSAT)
    big = plan.outcomes["big"]
    assert big.status is Status.RESERVED
    assert "48 GPUs in west" in big.reason
    assert big.at == NOW + timedelta(seconds=3600)
    where = {d.job_id: d.clusters for d in plan.starts}
    assert where == {"short": ("west",)}  # long waits: in west it would delay big
    assert plan.outcomes["long"].status is Status.WAITING
