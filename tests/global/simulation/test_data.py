"""Data in the simulator: the trace's dataset columns land in the job (and a mistake names the
column); a scenario places data by cluster or region; a job that runs where its data is not
holds its GPUs while the copy runs at the reserved rate, the bytes are counted per link and
between regions, and the cluster holds the data afterwards; the three data modes compared on
one small case that a person can check."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from volcano_global.cli.client import CliError
from volcano_global.cli.main import app
from volcano_global.simulation.data import DataState
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.running import Running
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.staging import Copies
from volcano_global.simulation.trace_file import TraceError, read_trace
from volcano_global.simulation.workload import DatasetRef, TraceJob
from volcano_global.solver import Policy
from volcano_global.solver.copies import Copy
from volcano_global.solver.data import CHECKPOINT
from volcano_global.solver.gravity import DataMode, DataOptions

TIB = 2**40
SCENARIO = {
    "clusters": [
        {"name": n, "region": r, "spec": {"nodeGroups": [{"count": 2, "gpusPerNode": 8, "gpuModel": "H100"}]}}
        for n, r in (("us-a", "us"), ("us-b", "us"), ("eu-a", "eu"))
    ],
    "links": [
        {"a": "us-a", "b": "us-b", "gbps": 400},
        {"a": "us-a", "b": "eu-a", "gbps": 100},
        {"a": "us-b", "b": "eu-a", "gbps": 100},
    ],
    "datasets": [
        {"name": "corpus", "size": "10Ti", "clusters": ["us-a"]},
        {"name": "shared", "size": "1Ti", "region": "us"},
    ],
}  # fmt: skip


def test_the_dataset_columns_land_in_the_job(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "id,arrival,pods,gpusPerPod,duration,dataset,datasetSize,datasetClusters,datasetRegion,"
        "checkpointSize\n"
        "a,0,1,8,600,corpus-v3,40Ti,us-a;us-b,,2Ti\n"
        "b,5,1,8,600,corpus-v3,,,,\n"
        "c,9,1,8,600,code,1099511627776,,eu,\n"
    )
    a, b, c = read_trace(path, "csv")
    assert a.datasets == (DatasetRef("corpus-v3", 40 * TIB, ("us-a", "us-b")),)
    assert a.checkpoint_bytes == 2 * TIB
    assert b.datasets == (DatasetRef("corpus-v3"),) and b.checkpoint_bytes is None
    assert c.datasets == (DatasetRef("code", TIB, (), "eu"),)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (",40Ti,", "t.csv:2: column datasetSize: needs a dataset name in column dataset"),
        ("d,forty,", "t.csv:2: column datasetSize: must be bytes or a quantity such as 40Ti: "
                      "invalid quantity 'forty'"),
    ],
)  # fmt: skip
def test_a_dataset_mistake_names_the_column(
    row: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("t.csv").write_text(
        f"arrival,pods,gpusPerPod,duration,dataset,datasetSize,datasetRegion\n0,1,8,60,{row}\n"
    )
    with pytest.raises(TraceError) as caught:
        read_trace(Path("t.csv"), "csv")
    assert str(caught.value).startswith(message)


def job(job_id: str, arrival: float, gpus: int, hours: float, data: str) -> TraceJob:
    return TraceJob(
        job_id, arrival, gpus // 8, 8, hours * 3600, "H100", datasets=(DatasetRef(data),)
    )


def test_a_job_away_from_its_data_holds_its_gpus_while_the_copy_runs() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    # "first" takes all of us-a for 10 h; "second" reads corpus (10 TiB, in us-a only).
    jobs = [job("first", 0, 16, 10, "corpus"), job("second", 1, 16, 1, "corpus")]
    result = Simulation(scenario, jobs, Policy.CPSAT, SimOptions()).run()
    second = next(r for r in result.records if r.job.id == "second")
    copy_s = 10 * TIB * 8 / 100e9  # 100 Gbps, the default rate of one copy: about 880 s
    assert second.start == 1 and second.staging_s == pytest.approx(copy_s)
    assert second.finish == pytest.approx(1 + copy_s + 3600)
    assert sum(result.moved_bytes.values()) == 10 * TIB
    # Staged inside the us region (us-b), not across to eu-a, when both are free: the
    # 400 Gbps link is no faster for one 100 Gbps copy, so either would do for time; the
    # region count says where it went.
    assert result.between_regions_bytes in (0, 10 * TIB)


def test_the_region_places_data_in_every_cluster_of_it() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    jobs = [job("first", 0, 16, 10, "shared"), job("second", 1, 16, 1, "shared")]
    result = Simulation(scenario, jobs, Policy.CPSAT, SimOptions()).run()
    second = next(r for r in result.records if r.job.id == "second")
    assert second.clusters == ("us-b",) and second.staging_s == 0


def test_waiting_for_the_holder_beats_a_long_copy_and_the_modes_differ() -> None:
    scenario = Scenario.model_validate(
        {**SCENARIO, "datasets": [{"name": "corpus", "size": "400Ti", "clusters": ["us-a"]}]}
    )
    # A 400 TiB copy takes about 9.8 h at 100 Gbps; us-a frees up after 1 h.
    jobs = [job("first", 0, 16, 1, "corpus"), job("second", 1, 16, 1, "corpus")]
    finish = {}
    for mode in DataMode:
        options = SimOptions(data=DataOptions(mode))
        result = Simulation(scenario, jobs, Policy.CPSAT, options).run()
        finish[mode] = max(r.finish or 0 for r in result.records)
    assert finish[DataMode.GRAVITY] == pytest.approx(7200)  # "second" waited for us-a
    assert finish[DataMode.HOLDERS] == pytest.approx(7200)
    assert finish[DataMode.OBLIVIOUS] > 9 * 3600  # one of them copied 400 TiB first


def test_the_command_reports_what_each_policy_staged(tmp_path: Path) -> None:
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    trace = tmp_path / "t.csv"
    trace.write_text(
        "id,arrival,pods,gpusPerPod,duration,dataset\n"
        "first,0,2,8,36000,corpus\n"
        "second,1,2,8,3600,corpus\n"
    )
    args = ["simulate", "--scenario", str(scenario), "--trace", f"csv:{trace}"]
    args += ["--policy", "cpsat", "--data", "oblivious", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("cpsat: staged"))
    assert line.startswith("cpsat: staged 10 TiB") and "per link:" in line
    assert "replicas" not in line


def test_the_command_replicates_a_popular_dataset_when_asked(tmp_path: Path) -> None:
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    trace = tmp_path / "t.csv"
    trace.write_text(
        "id,arrival,pods,gpusPerPod,duration,dataset\n"
        "r1,0,2,8,3600,shared\nr2,1,2,8,3600,shared\nr3,2000,2,8,3600,shared\n"
    )
    args = ["simulate", "--scenario", str(scenario), "--trace", f"csv:{trace}"]
    args += ["--policy", "cpsat", "--replicate-readers", "2", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("cpsat: staged"))
    # shared (1 TiB) is in region us: r1 and r2 start there, no job stages; with two readers
    # it is copied once into eu-a, where r3 then starts.
    assert line == (
        "cpsat: staged 1 TiB (1 TiB between regions) for 0 jobs, 0.0 h staging; per link: "
        "eu-a<->us-b 1 TiB; of which replicas 1 TiB"
    )


def test_a_trace_that_places_data_on_a_cluster_the_scenario_lacks_is_refused(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    trace = tmp_path / "t.csv"
    trace.write_text(
        "id,arrival,pods,gpusPerPod,duration,dataset,datasetClusters\na,0,1,8,60,x,us-z\n"
    )
    args = ["simulate", "--scenario", str(scenario), "--trace", f"csv:{trace}"]
    result = CliRunner().invoke(app, [*args, "--policy", "cpsat", "--out", str(tmp_path / "o")])
    assert isinstance(result.exception, CliError)
    assert str(result.exception) == (
        "job a: dataset x: datasetClusters names clusters the scenario does not have: us-z"
    )


def test_a_replica_ahead_of_demand_lets_a_later_reader_start_without_staging() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    # r1 takes us-a for 1 h; r2 stages into us-b (inside the region: per-job copies do not
    # leave it, margin 100); with two readers, corpus is popular: one copy goes to eu-a,
    # without GPUs, at 1 s; r3 arrives after it landed (about 881 s) and starts in eu-a at
    # once. Without replication r3 stages, holding its GPUs for the copy.
    jobs = [
        job("r1", 0, 16, 1, "corpus"),
        job("r2", 1, 16, 1, "corpus"),
        job("r3", 2000, 16, 1, "corpus"),
    ]
    replicate = DataOptions(replicate_readers=2, cross_region_margin=100.0)
    result = Simulation(scenario, jobs, Policy.CPSAT, SimOptions(data=replicate)).run()
    r3 = next(r for r in result.records if r.job.id == "r3")
    assert r3.clusters == ("eu-a",) and r3.staging_s == 0 and r3.finish == 2000 + 3600
    assert result.replicated_bytes == 10 * TIB == result.between_regions_bytes
    plain = Simulation(scenario, jobs, Policy.CPSAT, SimOptions()).run()
    assert next(r for r in plain.records if r.job.id == "r3").staging_s > 800
    assert plain.replicated_bytes == 0


def test_a_reader_arriving_while_the_replica_copies_waits_for_it_to_land() -> None:
    # As above, but r3 arrives at 500 s, while the replica to eu-a (started at 1 s, about
    # 880 s long) is still copying: the data is not in eu-a yet, and a second copy there is
    # not made, so r3 starts in eu-a when the replica lands, not at once with no staging.
    scenario = Scenario.model_validate(SCENARIO)
    jobs = [
        job("r1", 0, 16, 1, "corpus"),
        job("r2", 1, 16, 1, "corpus"),
        job("r3", 500, 16, 1, "corpus"),
    ]
    replicate = DataOptions(replicate_readers=2, cross_region_margin=100.0)
    result = Simulation(scenario, jobs, Policy.CPSAT, SimOptions(data=replicate)).run()
    r3 = next(r for r in result.records if r.job.id == "r3")
    lands = 1 + 10 * TIB * 8 / 100e9
    assert r3.clusters == ("eu-a",) and r3.staging_s == 0
    assert r3.start == pytest.approx(lands) and r3.finish == pytest.approx(lands + 3600)
    assert result.replicated_bytes == 10 * TIB == sum(result.moved_bytes.values()) - 10 * TIB


def test_popularity_counts_the_readers_submitted_within_the_window() -> None:
    scenario = Scenario.model_validate(SCENARIO)
    jobs = [job("a", 0, 8, 1, "corpus"), job("b", 50, 8, 1, "corpus"), job("c", 90, 8, 1, "shared")]
    state = Simulation(scenario, jobs, Policy.CPSAT).data
    seen = state.popularity(now=100, window_s=60)  # b and c; a is older, not counted
    assert {k: v.readers for k, v in seen.items()} == {"corpus": 1, "shared": 1}
    assert seen["corpus"].holders == ("us-a",) and seen["corpus"].size_bytes == 10 * TIB
    assert state.popularity(now=40, window_s=60)["corpus"].readers == 1  # b not yet arrived


def test_a_checkpoint_on_its_way_is_no_data_on_its_way_for_other_jobs() -> None:
    # The round's input of the simulator, as the server builds it: a job's checkpoint copy
    # (every one is named `checkpoint`) bars no other job's checkpoint from that cluster.
    scenario = Scenario.model_validate(SCENARIO)
    copies = Copies(DataState(scenario, []), DataOptions())
    checkpoint = Copy(CHECKPOINT, TIB, "us-a", "eu-a", 100.0)
    corpus = Copy("corpus", TIB, "us-a", "eu-a", 100.0)
    copies.fetch((checkpoint, corpus), now=0.0)
    run = Running(
        job("a", 0, 8, 1, "corpus"), [], ["us-b"], [], 0.0, 3600.0,
        copies=(Copy(CHECKPOINT, TIB, "us-a", "us-b", 100.0),),
    )  # fmt: skip
    assert copies.copying({"a": run}) == {"corpus": ("eu-a",)}
