"""Data gravity in `plan_round`, by hand: a job whose data is local starts there; one whose
holder is busy for longer than staging takes stages elsewhere (its copies reserved on the
link); one whose holder frees up sooner waits for it, and says so in numbers; staging shares
a link with a split job and never oversubscribes it; a split stages into every cluster that
lacks the data; a requeued job goes back to its checkpoint's cluster; the two baselines
(holders only, data-oblivious) do what their names say."""

from __future__ import annotations

from dataclasses import replace as dataclass_replace
from datetime import timedelta

from tests.solver_support.gravity import (
    LINK,
    NOW,
    TIB,
    busy,
    cluster,
    gang,
    reads,
    west_busy,
)
from volcano_global.solver import (
    ClusterCapacity,
    JobRequest,
    Leaf,
    LinkBandwidth,
    LinkState,
    Policy,
    RunningJob,
)
from volcano_global.solver.data import CheckpointNeed, DataNeeds, DatasetNeed, Item, source_for
from volcano_global.solver.gravity import DataMode, DataOptions
from volcano_global.solver.model import link_key
from volcano_global.solver.preemption import PREEMPT, Rules
from volcano_global.solver.round_plan import RoundInput, RoundOptions, Status, plan_round


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
