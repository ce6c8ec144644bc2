"""Data gravity in `plan_round`, by hand: a job whose data is local starts there; one whose
holder is busy for longer than staging takes stages elsewhere (its copies reserved on the
link); one whose holder frees up sooner waits for it, and says so in numbers; staging shares
a link with a split job and never oversubscribes it; a split stages into every cluster that
lacks the data; a requeued job goes back to its checkpoint's cluster; the two baselines
(holders only, data-oblivious) do what their names say."""

from __future__ import annotations

from dataclasses import replace as dataclass_replace
from datetime import timedelta

from tests.solver_support.gravity import NOW, TIB, cluster, gang, reads
from volcano_global.solver import (
    ClusterCapacity,
    JobRequest,
    Leaf,
    LinkBandwidth,
    LinkState,
    Policy,
    RunningJob,
)
from volcano_global.solver import copies as copies_
from volcano_global.solver.data import CheckpointNeed, DataNeeds, DatasetNeed, Item, source_for
from volcano_global.solver.gravity import DataMode, DataOptions, Steer, steer
from volcano_global.solver.model import link_key
from volcano_global.solver.preemption import PREEMPT, Rules
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Status, plan_round

PREFETCH = DataOptions(prefetch=True)


def busy(job_id: str, where: str, gpus: int, ends_in_s: float) -> RunningJob:
    return RunningJob(job_id, ((where, "H100", gpus),), ends_in_s=ends_in_s, name=job_id)


LINK = LinkState("east", "west", 100.0)


def west_busy(ends_in_s: float, needs: DataNeeds) -> RoundInput:
    """east free; west, where the data is, full until `ends_in_s`; one 16-GPU job waiting."""
    return RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("j", 16),),
        running=(busy("r", "west", 32, ends_in_s),),
        data={"j": needs},
    )


def test_a_job_whose_data_is_local_starts_where_it_is() -> None:
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 4)),
        (LINK,),
        waiting=(gang("j", 16),),
        data={"j": reads(10, "west")},
    )
    plan = plan_round(data, Policy.CPSAT)
    assert [d.clusters for d in plan.starts] == [("west",)]
    assert plan.staging == {}


def test_a_job_stages_when_its_holder_is_busy_for_longer_than_the_copy() -> None:
    # 1 TiB over 100 Gbps: about 88 s; west has room in 2 h.
    data = west_busy(7200.0, reads(1, "west"))
    plan = plan_round(data, Policy.CPSAT)
    assert [d.clusters for d in plan.starts] == [("east",)]
    (copy,) = plan.staging["j"]
    assert (copy.data, copy.source, copy.destination, copy.gbps) == ("corpus", "west", "east", 100)
    assert 87 < copy.seconds < 89
    assert "staging corpus (1 TiB) from west to east at 100 Gbps: about 88 s" in (
        plan.outcomes["j"].reason
    )


def test_a_job_waits_for_its_holder_when_that_is_sooner_than_staging() -> None:
    # 40 TiB over 100 Gbps: about 59 min; west has room in 20 min.
    data = west_busy(1200.0, reads(40, "west", name="corpus-v3"))
    plan = plan_round(data, Policy.CPSAT)
    assert plan.starts == ()
    outcome = plan.outcomes["j"]
    assert outcome.status is Status.WAITING
    assert outcome.reason.startswith(
        "dataset corpus-v3 (40 TiB) is in west; staging to east at 100 Gbps takes 59 min; "
        "west has room in about 20 min: waiting for west"
    )
    assert outcome.at == NOW + timedelta(seconds=1200)


def test_staging_takes_what_a_split_job_leaves_of_a_link_and_a_second_copy_waits() -> None:
    # A running split holds 60 of the link's 100 Gbps: the first copy gets 40, the next none.
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LinkState("east", "west", 100.0, 60.0),),
        waiting=(gang("j", 8), gang("k", 8)),
        running=(busy("r", "west", 32, 7200.0),),
        data={"j": reads(1, "west"), "k": reads(1, "west", name="other")},
    )
    plan = plan_round(data, Policy.CPSAT)
    assert [d.job_id for d in plan.starts] == ["j"]
    (copy,) = plan.staging["j"]
    assert copy.gbps == 40.0
    assert "waits for bandwidth: 0 Gbps free from west" in plan.outcomes["k"].reason


def test_a_start_that_finds_no_bandwidth_for_its_copy_waits() -> None:
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LinkState("east", "west", 100.0, 99.5),),
        waiting=(gang("j", 16),),
        data={"j": reads(1, "west")},
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(DataMode.OBLIVIOUS)))
    assert plan.starts == ()
    assert "waits for bandwidth: 0.5 Gbps free from west" in plan.outcomes["j"].reason


def test_a_split_stages_into_every_cluster_that_lacks_the_data() -> None:
    split = gang("j", 64, unit_pods=1, splittable=True, max_clusters=3)
    links = (LinkState("a", "b", 400.0), LinkState("a", "c", 400.0), LinkState("b", "c", 400.0))
    data = RoundInput(
        NOW,
        (cluster("a", 3), cluster("b", 3), cluster("c", 3)),
        links,
        waiting=(split,),
        data={"j": reads(1, "a")},
    )
    plan = plan_round(data, Policy.CPSAT)
    (start,) = plan.starts
    lacking = set(start.clusters) - {"a"}
    assert lacking
    assert {c.destination for c in plan.staging["j"]} == lacking
    assert all(c.source == "a" for c in plan.staging["j"])


def test_a_requeued_job_goes_back_to_the_cluster_that_holds_its_checkpoint() -> None:
    needs = DataNeeds(checkpoint=CheckpointNeed(size_bytes=8 * TIB, cluster="west"))
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 2, 2)),
        (LINK,),
        waiting=(gang("j", 16),),
        data={"j": needs},
    )
    plan = plan_round(data, Policy.CPSAT)
    assert [d.clusters for d in plan.starts] == [("west",)]


def test_the_holders_only_baseline_waits_however_long_and_oblivious_stages_at_once() -> None:
    data = west_busy(7200.0, reads(1, "west"))
    holders = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(DataMode.HOLDERS)))
    assert holders.starts == ()
    assert holders.outcomes["j"].reason.startswith("dataset corpus (1 TiB): only where it is")
    # Oblivious: both clusters free -> it may land where the data is not, and then stages.
    free = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 2, 2)),
        (LINK,),
        waiting=(gang("j", 32),),
        data={"j": reads(1, "west")},
    )
    oblivious = plan_round(
        free, Policy.FIRST_FIT, RoundOptions(data=DataOptions(DataMode.OBLIVIOUS))
    )
    assert [d.clusters for d in oblivious.starts] == [("east",)]
    assert [c.destination for c in oblivious.staging["j"]] == ["east"]


def test_a_dataset_read_remotely_or_held_nowhere_constrains_nothing() -> None:
    needs = DataNeeds(
        datasets=(
            DatasetNeed("remote", TIB, ("west",), read_gbps=10.0),
            DatasetNeed("outside", TIB, ()),
        )
    )
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("j", 16),),
        data={"j": needs},
    )
    plan = plan_round(data, Policy.CPSAT)
    assert [d.clusters for d in plan.starts] == [("east",)]
    assert plan.staging == {}


def test_no_data_declared_changes_nothing() -> None:
    base = RoundInput(
        NOW, (cluster("east", 4), cluster("west", 4)), (LINK,), waiting=(gang("j", 16),)
    )
    assert (
        plan_round(base, Policy.CPSAT).starts[0].shares
        == plan_round(RoundInput(**{**base.__dict__, "data": {"j": DataNeeds()}}), Policy.CPSAT)
        .starts[0]
        .shares
    )
    _ = LinkBandwidth  # the type the reservations are made of


def test_prefetch_copies_a_waiting_jobs_data_to_where_room_comes_sooner_once() -> None:
    # west (the holder) is busy for 10 h, east for 1 h: copy now to east, without GPUs.
    data = RoundInput(
        NOW,
        (cluster("east", 0, 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("j", 16),),
        running=(busy("r", "west", 32, 36000.0), busy("s", "east", 32, 3600.0)),
        data={"j": reads(1, "west")},
    )
    options = RoundOptions(data=DataOptions(prefetch=True))
    plan = plan_round(data, Policy.CPSAT, options)
    assert plan.starts == ()
    (copy,) = plan.prefetch["j"]
    assert (copy.source, copy.destination, copy.gbps) == ("west", "east", 100.0)
    assert "west has room in about 10.0 h: waiting for west; copying it to east meanwhile" in (
        plan.outcomes["j"].reason
    )
    # Once on its way, it is not fetched again; without the option, never.
    again = RoundInput(**{**data.__dict__, "copying": {"corpus": ("east",)}})
    assert plan_round(again, Policy.CPSAT, options).prefetch == {}
    assert plan_round(data, Policy.CPSAT).prefetch == {}


def test_a_prefetch_is_not_made_into_a_cluster_a_start_of_the_round_stages_the_data_to() -> None:
    # As above, but east has one node free now: "k" (first in order) starts there and stages
    # the corpus west -> east; "j" waits for east's room, and its prefetch would copy the same
    # corpus into east a second time (the link has room for both).
    east = ClusterCapacity("east", (Leaf("H100", (3, 0, 0, 0, 0, 0, 0, 0, 1), ("east",), 8),))
    data = RoundInput(
        NOW,
        (east, cluster("west", 0, 4)),
        (LinkState("east", "west", 400.0),),
        waiting=(gang("k", 8, priority=60), gang("j", 16)),
        running=(busy("r", "west", 32, 36000.0), busy("s", "east", 24, 3600.0)),
        data={"k": reads(1, "west"), "j": reads(1, "west")},
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(prefetch=True)))
    assert [d.job_id for d in plan.starts] == ["k"]
    assert [(c.data, c.destination) for c in plan.staging["k"]] == [("corpus", "east")]
    assert plan.prefetch == {}
    assert "waiting for west; its data is on its way to east (the start of k)" in (
        plan.outcomes["j"].reason
    )
    # "k" reads another dataset over a link of 100 Gbps: its copy takes all of it, and "j"
    # is told its prefetch waits for bandwidth (not that it is being copied).
    thin = dataclass_replace(
        data,
        links=(LinkState("east", "west", 100.0),),
        data={**data.data, "k": reads(1, "west", name="other")},
    )
    plan = plan_round(thin, Policy.CPSAT, RoundOptions(data=DataOptions(prefetch=True)))
    assert [d.job_id for d in plan.starts] == ["k"] and plan.prefetch == {}
    reason = plan.outcomes["j"].reason
    assert "waiting for west; copying it to east waits for bandwidth" in reason
    assert "meanwhile" not in reason


def test_a_preemptor_that_lands_away_from_its_data_gets_its_copies_or_evicts_nobody() -> None:
    low = RunningJob(
        "low", (("east", "H100", 32),), ends_in_s=36000.0, run_s=3600.0, lost_s=60.0, name="low",
        pods=(("east", "east", "", 4, 8),),
    )  # fmt: skip
    high = RunningJob(
        "high", (("west", "H100", 32),), ends_in_s=36000.0, priority=100, run_s=3600.0,
        preemptable=False, name="high", pods=(("west", "west", "", 4, 8),),
    )  # fmt: skip
    data = RoundInput(
        NOW,
        (cluster("east", 0, 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("j", 32, priority=50, may_evict_for=frozenset({PREEMPT})),),
        running=(low, high),
        data={"j": reads(1, "west")},
    )
    options = RoundOptions(preemption=Rules(min_run_s=0, wait_weight=None))
    plan = plan_round(data, Policy.CPSAT, options)
    (eviction,) = plan.evictions
    assert eviction.preemptor == "j" and eviction.placement.clusters == ("east",)
    (copy,) = plan.staging["j"]
    assert (copy.source, copy.destination) == ("west", "east")
    # A start of the same round ("k", first in order, one free node of east) takes the whole
    # link for its own copy: the preemptor cannot stage, so nobody is evicted for it.
    east = ClusterCapacity("east", (Leaf("H100", (4, 0, 0, 0, 0, 0, 0, 0, 1), ("east",), 8),))
    first = gang("k", 8, priority=60)
    busy_link = RoundInput(
        **{
            **data.__dict__,
            "clusters": (east, cluster("west", 0, 4)),
            "waiting": (first, *data.waiting),
            "data": {**data.data, "k": reads(1, "west", name="other")},
        }
    )
    taken = plan_round(busy_link, Policy.CPSAT, options)
    assert [d.job_id for d in taken.starts] == ["k"] and taken.staging["k"][0].gbps == 100.0
    assert taken.evictions == ()
    assert "it would evict, but staging corpus to east waits for bandwidth" in (
        taken.outcomes["j"].reason
    )


def test_a_preemptor_waits_for_the_copy_a_start_of_the_round_makes_where_it_would_start() -> None:
    # As above on a link with room for two copies, "k" reading the same corpus: its start
    # stages the corpus into east; the preemptor would copy it there a second time, so it
    # waits for that copy and nobody is evicted yet.
    low = RunningJob(
        "low", (("east", "H100", 32),), ends_in_s=36000.0, run_s=3600.0, name="low",
        pods=(("east", "east", "", 4, 8),),
    )  # fmt: skip
    east = ClusterCapacity("east", (Leaf("H100", (4, 0, 0, 0, 0, 0, 0, 0, 1), ("east",), 8),))
    data = RoundInput(
        NOW,
        (east, cluster("west", 0, 4)),
        (LinkState("east", "west", 400.0),),
        waiting=(
            gang("k", 8, priority=60),
            gang("j", 32, priority=50, may_evict_for=frozenset({PREEMPT})),
        ),
        running=(low, busy("high", "west", 32, 36000.0)),
        data={"k": reads(1, "west"), "j": reads(1, "west")},
    )
    options = RoundOptions(preemption=Rules(min_run_s=0, wait_weight=None))
    plan = plan_round(data, Policy.CPSAT, options)
    assert [d.job_id for d in plan.starts] == ["k"]
    assert [(c.data, c.destination) for c in plan.staging["k"]] == [("corpus", "east")]
    assert plan.evictions == () and "j" not in plan.staging
    assert (
        "it would evict, but corpus is being copied to east (the start of k): waiting for that "
        "copy" in plan.outcomes["j"].reason
    )


def test_a_later_job_is_not_told_the_room_an_earlier_one_takes() -> None:
    # west (the holder) has room for the first in the order (j3, the shortest); the others
    # stage into east at once rather than wait 2 h for room west already promised to it.
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 2, 2)),
        (LinkState("east", "west", 400.0),),
        waiting=(gang("j1", 16), gang("j2", 16), gang("j3", 8)),
        running=(busy("r", "west", 16, 7200.0),),
        data={j: reads(1, "west", name=f"corpus-{j}") for j in ("j1", "j2", "j3")},
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(staging_gbps=200.0)))
    where = {d.job_id: d.clusters for d in plan.starts}
    assert where == {"j3": ("west",), "j1": ("east",), "j2": ("east",)}


def test_a_copy_over_a_thin_link_is_passed_over_when_a_fat_one_serves_nearly_as_soon() -> None:
    # 10 TiB from us-a: about 220 s to us-b over 400 Gbps, 880 s to eu-a over 100 Gbps. The
    # solver would fill the smaller eu-a first; the data sends the job to us-b.
    data = RoundInput(
        NOW,
        (cluster("us-a", 0, 4), cluster("us-b", 8), cluster("eu-a", 4)),
        (LinkState("us-a", "us-b", 400.0), LinkState("us-a", "eu-a", 100.0)),
        waiting=(gang("j", 16),),
        running=(busy("r", "us-a", 32, 7200.0),),
        data={"j": reads(10, "us-a")},
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(staging_gbps=400.0)))
    assert [d.clusters for d in plan.starts] == [("us-b",)]


def test_a_copy_slowed_by_an_earlier_start_past_the_holders_room_waits_instead() -> None:
    # Each copy may take 60 Gbps. Alone, j's 10 TiB would take about 24 min, sooner than room
    # in west (30 min); k, first in order, takes 60 of the link's 100, and at the 40 left j's
    # copy would take about 37 min: j waits for west.
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LINK,),
        waiting=(gang("k", 8, priority=10), gang("j", 16)),
        running=(busy("r", "west", 32, 1800.0),),
        data={"k": reads(1, "west", name="other"), "j": reads(10, "west")},
    )
    plan = plan_round(data, Policy.CPSAT, RoundOptions(data=DataOptions(staging_gbps=60.0)))
    assert [d.job_id for d in plan.starts] == ["k"]
    assert "longer than waiting for room where its data is (in about 30 min)" in (
        plan.outcomes["j"].reason
    )


def test_an_elastic_job_grows_only_where_its_data_is() -> None:
    # 2 of its 4 units run in west (the holder, now full); east is free: it does not grow there.
    from volcano_global.solver import planning

    request = JobRequest(
        "e", pods=4, gpus_per_pod=8, gpu_model="H100", unit_pods=1, min_units=1, splittable=True,
        max_clusters=2,
    )  # fmt: skip
    run = planning.ElasticRun(request, units_in=(("west", 2),), since_s=36000.0)
    data = RoundInput(
        NOW,
        (cluster("east", 4), cluster("west", 0, 4)),
        (LINK,),
        elastic=(run,),
        data={"e": reads(1, "west")},
    )
    assert plan_round(data, Policy.CPSAT).grows == ()
    oblivious = RoundOptions(data=DataOptions(DataMode.OBLIVIOUS))
    assert [g.decision.clusters for g in plan_round(data, Policy.CPSAT, oblivious).grows] == [
        ("east",)
    ]


def test_with_a_margin_a_copy_from_inside_the_region_is_taken_when_as_fast() -> None:
    # eu-b lacks the corpus; us-b holds it over a 100 Gbps link, eu-a over a 400 Gbps link of
    # which 300 are held: both give a copy its 100 Gbps. By name us-b serves, and so it does
    # when regions are known but no margin is set (regions alone change no choice); with a
    # margin eu-a does, and no byte leaves the region.
    links = (LinkState("us-b", "eu-b", 100.0), LinkState("eu-a", "eu-b", 400.0, 300.0))
    data = RoundInput(
        NOW,
        (cluster("eu-a", 0, 4), cluster("eu-b", 4), cluster("us-b", 0, 4)),
        links,
        waiting=(gang("j", 16),),
        running=(busy("r", "eu-a", 32, 7200.0), busy("s", "us-b", 32, 7200.0)),
        data={"j": reads(1, "eu-a", "us-b")},
    )
    regions = {"eu-a": "eu", "eu-b": "eu", "us-b": "us"}
    margin = RoundOptions(data=DataOptions(cross_region_margin=0.5))
    for known, options, source in (
        ({}, RoundOptions(), "us-b"),
        (regions, RoundOptions(), "us-b"),
        (regions, margin, "eu-a"),
    ):
        plan = plan_round(dataclass_replace(data, regions=known), Policy.CPSAT, options)
        (copy,) = plan.staging["j"]
        assert (copy.source, copy.destination, copy.gbps) == (source, "eu-b", 100.0)


def test_the_margin_chooses_the_source_a_slower_link_inside_the_region() -> None:
    # x (us) and y (eu) hold the corpus; x's link gives 100 Gbps, y's 80. Weighed 1.5 times,
    # x's copy counts as 66.7 Gbps: y serves. Without the margin, x.
    holders = Item("c", 2**40, ("x", "y"))
    free = {link_key("x", "d"): 100.0, link_key("y", "d"): 80.0}
    regions = {"x": "us", "y": "eu", "d": "eu"}
    assert source_for(holders, "d", free, 400.0, regions, 0.5) == "y"
    assert source_for(holders, "d", free, 400.0, regions, 0.0) == "x"


def test_a_copy_between_regions_must_save_its_margin_over_waiting_for_the_holder() -> None:
    # 40 TiB over 100 Gbps: about 59 min; west, where it is, has room in 80 min. Weighed 1.5
    # times (cross_region_margin 0.5) the copy takes 88 min: the job waits, when the regions
    # are known; when they are not, or the margin is 0, it stages.
    data = west_busy(4800.0, reads(40, "west"))
    margin = RoundOptions(data=DataOptions(cross_region_margin=0.5))
    regions = {"east": "e", "west": "w"}
    assert plan_round(dataclass_replace(data, regions=regions), Policy.CPSAT, margin).starts == ()
    assert plan_round(data, Policy.CPSAT, margin).starts != ()
    none = RoundOptions(data=DataOptions(cross_region_margin=0.0))
    assert plan_round(dataclass_replace(data, regions=regions), Policy.CPSAT, none).starts != ()


def test_with_a_margin_prefetch_prefers_a_cluster_inside_the_region() -> None:
    # west (the holder, region w) is busy for 10 h, east (region e) for 1 h, west2 (region w)
    # for 2 h; a copy of 1 TiB takes about 88 s over either link. Without a margin the data
    # goes to east, where room comes first; weighed 101 times (margin 100) the copy to east
    # counts 2.5 h, so west2 (room in 2 h) is sooner and no byte leaves the region.
    data = RoundInput(
        NOW,
        (cluster("east", 0, 4), cluster("west", 0, 4), cluster("west2", 0, 4)),
        (LINK, LinkState("west", "west2", 100.0)),
        waiting=(gang("j", 16),),
        running=(
            busy("r", "west", 32, 36000.0),
            busy("s", "east", 32, 3600.0),
            busy("t", "west2", 32, 7200.0),
        ),
        data={"j": reads(1, "west")},
        regions={"east": "e", "west": "w", "west2": "w"},
    )
    for margin, target in ((0.0, "east"), (100.0, "west2")):
        options = RoundOptions(data=DataOptions(prefetch=True, cross_region_margin=margin))
        (copy,) = plan_round(data, Policy.CPSAT, options).prefetch["j"]
        assert (copy.source, copy.destination) == ("west", target)


def test_a_job_that_may_evict_prefetches_unless_it_has_room_or_no_copy_may_go() -> None:
    # west (the holder) is full for 10 h; east has one free node (8 GPUs) of the 16 the job
    # needs, and the rest ends in 1 h. Evicting in east to stage there holds GPUs while it
    # copies: the data is copied to east meanwhile instead (8 free GPUs are not room).
    # Where no copy may go to east now (a copy failed there lately), the eviction path stays.
    job = gang("j", 16, may_evict_for=frozenset({PREEMPT})).request
    clusters = (cluster("east", 1, 3), cluster("west", 0, 4))
    running = (busy("r", "west", 32, 36000.0), busy("s", "east", 24, 3600.0))

    def steered(barred: tuple[str, ...]) -> Steer:
        _, decided = steer(
            [job],
            {"j": reads(1, "west")},
            clusters=clusters,
            links=(LINK,),
            running=running,
            options=DataOptions(prefetch=True),
            evicting=True,
            no_prefetch={"j": barred},
        )
        return decided["j"]

    fetch = steered(())
    assert (fetch.prefetch_to, fetch.allowed) == ("east", ("west",))
    evict = steered(("east",))
    assert (evict.prefetch_to, evict.allowed) == (None, ("west", "east"))


def test_two_jobs_checkpoints_are_both_prefetched_into_one_cluster() -> None:
    # Each job's checkpoint is its own, though both are named `checkpoint`: one fetched into
    # east for a does not stand for b's.
    needs = {k: DataNeeds(checkpoint=CheckpointNeed(TIB, "west")) for k in ("a", "b")}
    steered = {k: Steer(("west",), "", 100.0, "east") for k in ("a", "b")}
    out = copies_.prefetch(steered, set(), needs, (LinkState("west", "east", 400.0),), PREFETCH)
    assert {k: [(c.data, c.destination) for c in v] for k, v in out.items()} == {
        "a": [("checkpoint", "east")],
        "b": [("checkpoint", "east")],
    }


def test_once_a_broken_clusters_backoff_ends_one_job_is_copied_there_the_others_wait() -> None:
    # Copies into east kept failing and their backoff ended: one copy (the first job's) tries
    # again; the second job, which would be copied there too, is not, and says why.
    def steered(probe: dict[str, str]) -> dict[str, Steer]:
        _, decided = steer(
            [gang(k, 16).request for k in ("j", "k")],
            {k: reads(1, "west") for k in ("j", "k")},
            clusters=(cluster("east", 0, 4), cluster("west", 0, 4)),
            links=(LinkState("east", "west", 400.0),),
            running=(busy("r", "west", 32, 36000.0), busy("s", "east", 32, 3600.0)),
            options=DataOptions(prefetch=True),
            probe_copies_into=probe,
        )
        return decided

    assert [s.prefetch_to for s in steered({}).values()] == ["east", "east"]
    first, second = steered({"east": "one copy into it tries again"}).values()
    assert (first.prefetch_to, second.prefetch_to) == ("east", None)
    assert "not copying it to east meanwhile: one copy into it tries again" in second.note


def test_a_job_that_stages_at_its_start_is_not_told_of_a_prefetch_refused_there() -> None:
    # east has room now and copies into east keep failing: the job starts in east staging
    # (a share's staging, not a prefetch), and its reason says nothing of a refused copy.
    _, decided = steer(
        [gang("j", 16).request],
        {"j": reads(1, "west")},
        clusters=(cluster("east", 4), cluster("west", 0, 4)),
        links=(LINK,),
        running=(busy("r", "west", 32, 7200.0),),
        options=DataOptions(prefetch=True),
        no_copies_into={"east": "copies into it failed 3 times in a row"},
    )
    assert decided["j"].allowed == ("west", "east")  # the holder, and where it stages
    assert "staging to east" in decided["j"].note
    assert "not copying it" not in decided["j"].note
