"""A job that waits for the busy cluster holding its data while the data is copied to another
(prefetch) is reserved room there from when the copy ends (`DataOptions.hold_at_prefetch`):
only work that ends before then backfills that cluster meanwhile (issue 33, docs/benchmarks.md
3e "later, round 5")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from volcano_global.solver import ClusterCapacity, JobRequest, Leaf, LinkState, Policy, RunningJob
from volcano_global.solver.data import DataNeeds, DatasetNeed
from volcano_global.solver.gravity import DataOptions
from volcano_global.solver.round_plan import (
    RoundInput,
    RoundOptions,
    Status,
    Waiting,
    plan_round,
)

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TIB = 2**40
# west holds the corpus and is full for 10 h; east (8 nodes of 8 GPUs) has 4 nodes free now,
# 2 more at 30 min and the last 2 at 1 h. 60 TiB over 100 Gbps: about 88 min.
WEST = ClusterCapacity("west", (Leaf("H100", (8,) + (0,) * 8, ("west",), node_gpus=8),))
EAST = ClusterCapacity("east", (Leaf("H100", (4,) + (0,) * 7 + (4,), ("east",), node_gpus=8),))
LINK = LinkState("east", "west", 100.0)
RUNNING = (
    RunningJob("w", (("west", "H100", 64),), ends_in_s=36000.0, name="w"),
    RunningJob("r1", (("east", "H100", 16),), ends_in_s=1800.0, name="r1"),
    RunningJob("r2", (("east", "H100", 16),), ends_in_s=3600.0, name="r2"),
)
CORPUS = DataNeeds(datasets=(DatasetNeed("corpus", 60 * TIB, ("west",)),))


def job(job_id: str, gpus: int, waited_s: float, run_s: float) -> Waiting:
    request = JobRequest(job_id, pods=gpus // 8, gpus_per_pod=8, gpu_model="H100")
    return Waiting(request, NOW - timedelta(seconds=waited_s), estimate_s=run_s)


def plan(hold: bool):  # type: ignore[no-untyped-def]
    data = RoundInput(
        NOW,
        (EAST, WEST),
        (LINK,),
        waiting=(
            job("big", 64, 7200.0, 7200.0),
            job("long", 16, 300.0, 14400.0),
            job("short", 16, 300.0, 600.0),
        ),
        running=RUNNING,
        data={"big": CORPUS},
    )
    options = RoundOptions(data=DataOptions(prefetch=True, hold_at_prefetch=hold))
    return plan_round(data, Policy.CPSAT, options)


def test_the_prefetch_target_is_drained_for_the_job_from_when_its_copy_ends() -> None:
    result = plan(hold=True)
    assert [c.destination for c in result.prefetch["big"]] == ["east"]
    big = result.outcomes["big"]
    assert big.status is Status.RESERVED
    assert "64 GPUs in east" in big.reason
    copy_s = result.prefetch["big"][0].seconds
    assert big.at == NOW + timedelta(seconds=copy_s)  # room at 1 h; the data at about 88 min
    where = {d.job_id: d.clusters for d in result.starts}
    assert where == {"short": ("east",)}  # long would still run when the copy ends
    assert result.outcomes["long"].status is Status.WAITING


def test_off_the_target_fills_with_any_work_while_the_copy_runs() -> None:
    result = plan(hold=False)
    assert [c.destination for c in result.prefetch["big"]] == ["east"]
    assert result.outcomes["big"].status is not Status.RESERVED or (
        "in east" not in result.outcomes["big"].reason
    )
    assert {d.job_id for d in result.starts} == {"long", "short"}
