"""A team's own trace (`--trace csv:FILE`, `jsonl:FILE`): every column lands in the job the
simulator replays, in both formats alike; each kind of mistake is reported with the file, the
line and the column; the command replays a tiny trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from volcano_global.cli.client import CliError
from volcano_global.cli.main import app
from volcano_global.settings import SchedulingDefaults
from volcano_global.simulation.trace_file import COLUMNS, TraceError, read_trace
from volcano_global.simulation.workload import TraceJob

REPO = Path(__file__).resolve().parents[3]
HIGH = SchedulingDefaults().priority_classes["high-priority"]

CSV = """\
id,arrival,pods,gpusPerPod,gpuModel,duration,steps,stepsPerSecond,runningEstimate,queue,priority,priorityClass,tensorParallel,pipelineParallel,dataParallel,modelParameters,stepTime,toleratedShare,optimizerSharding,maySplit,maxClusters,unitPods,unitTier
small,0,1,2,,600,,,1h30m,research,,high-priority,,,,,,,,,,,
gang,12.5,4,8,H100,,36000,10,7200,,,,8,2,2,7e9,10,0.2,,yes,,,1

,30,2,4,,100,,,,,-5,,,,,1e9,2,,zero3,1,3,2,
"""
JSONL = [
    {"id": "small", "arrival": 0, "pods": 1, "gpusPerPod": 2, "duration": 600,
     "runningEstimate": "1h30m", "queue": "research", "priorityClass": "high-priority"},
    {"id": "gang", "arrival": 12.5, "pods": 4, "gpusPerPod": 8, "gpuModel": "H100",
     "steps": 36000, "stepsPerSecond": 10, "runningEstimate": 7200, "tensorParallel": 8,
     "pipelineParallel": 2, "dataParallel": 2, "modelParameters": 7e9, "stepTime": 10,
     "toleratedShare": 0.2, "maySplit": True, "unitTier": 1, "queue": None},
    {"arrival": "30", "pods": 2, "gpusPerPod": 4, "duration": 100, "priority": -5,
     "modelParameters": 1e9, "stepTime": 2, "optimizerSharding": "zero3", "maySplit": "1",
     "maxClusters": 3, "unitPods": 2, "gpuModel": ""},
]  # fmt: skip
EXPECTED = [
    TraceJob("small", 0.0, 1, 2, 600.0, priority=HIGH, queue="research", estimate_s=5400.0),
    TraceJob(
        "gang",
        12.5,
        4,
        8,
        3600.0,  # 36,000 steps at 10 per second
        "H100",
        splittable=True,
        unit_pods=2,  # pipelineParallel
        max_clusters=4,  # the scheduler's default for a split job
        unit_tier=1,
        allreduce_gbps=56.0,  # 8 bits x 7e9 x 2 bytes (bf16, ZeRO-1) / (0.2 x 10 s) / 1e9
        comm_share=0.2,
        estimate_s=7200.0,
    ),
    TraceJob(
        "row-3",
        30.0,
        2,
        4,
        100.0,
        splittable=True,
        unit_pods=2,
        max_clusters=3,
        allreduce_gbps=120.0,  # ZeRO-3 moves 1.5x: 8 x 1.5 x 1e9 x 2 / (0.1 x 2 s) / 1e9
        comm_share=0.1,  # a plan's default share
        priority=-5,
    ),
]


def test_every_column_lands_in_the_job_from_csv_and_jsonl_alike(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(CSV)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(row) + "\n" for row in JSONL))
    from_csv = read_trace(tmp_path / "t.csv", "csv")
    assert from_csv == EXPECTED
    assert read_trace(tmp_path / "t.jsonl", "jsonl") == from_csv
    assert [j.id for j in read_trace(tmp_path / "t.csv", "csv", limit=2)] == ["small", "gang"]


def test_steps_at_a_rate_are_the_duration_and_the_cli_gpu_model_fills_gaps(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival,pods,gpusPerPod,steps,stepsPerSecond\n0,1,1,1000,0.5\n")
    (job,) = read_trace(path, "csv", gpu_model="V100")
    assert (job.duration_s, job.gpu_model) == (2000.0, "V100")


def test_iso_times_count_from_the_earliest_row_and_jobs_come_by_arrival(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [
        ("a", "2024-05-01T10:00:30+02:00"),  # 08:00:30 UTC
        ("b", "2024-05-01T08:00:00Z"),  # the earliest
        ("c", "2024-05-01T09:01:00+01:00"),  # 08:01:00 UTC
    ]
    path.write_text(
        "".join(
            json.dumps({"id": i, "arrival": t, "pods": 1, "gpusPerPod": 1, "duration": 60}) + "\n"
            for i, t in rows
        )
    )
    assert [(j.id, j.arrival_s) for j in read_trace(path, "jsonl")] == [
        ("b", 0.0),
        ("a", 30.0),
        ("c", 60.0),
    ]
    assert [j.id for j in read_trace(path, "jsonl", limit=2)] == ["b", "a"]


BASE = "arrival,pods,gpusPerPod,duration"
PLAN = "arrival,pods,gpusPerPod,duration,tensorParallel,pipelineParallel,dataParallel"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{BASE}\n0,1,1,10\n0,x,1,10\n", "trace.csv:3: column pods: must be an integer from 1 to 1,000,000, got 'x'"),
        (f"{BASE}\n0,1,-1,10\n", "trace.csv:2: column gpusPerPod: must be an integer from 0 to 1024, got '-1'"),
        (f"{BASE}\n0,1,2048,10\n", "trace.csv:2: column gpusPerPod: must be an integer from 0 to 1024, got '2048'"),
        (f"{BASE}\n0,1,1,inf\n", "trace.csv:2: column duration: must be seconds > 0, got 'inf'"),
        ("arrival,pods,gpuPerPod,duration,colour\n0,1,1,10,red\n",
         "trace.csv:1: unknown columns 'gpuPerPod' (did you mean gpusPerPod?), 'colour'"),
        ("pods,gpusPerPod,duration\n1,1,10\n", "trace.csv:2: column arrival: required"),
        (f"{BASE}\n0,1,1,10,5\n", "trace.csv:2: 5 cells, the header names 4"),
        ("arrival,pods,gpusPerPod\n0,1,1\n",
         "trace.csv:2: column duration: required (or steps and stepsPerSecond)"),
        ("arrival,pods,gpusPerPod,steps\n0,1,1,100\n",
         "trace.csv:2: column stepsPerSecond: required with steps"),
        ("arrival,pods,gpusPerPod,duration,steps,stepsPerSecond\n0,1,1,5,100,2\n",
         "trace.csv:2: column steps: give duration, or steps and stepsPerSecond, not both"),
        (f"{BASE},runningEstimate\n0,1,1,10,soon\n",
         "trace.csv:2: column runningEstimate: must be seconds > 0 or a Go duration such as "
         "1h30m, got 'soon'"),
        (f"{BASE},priorityClass\n0,1,1,10,urgent\n",
         "trace.csv:2: column priorityClass: unknown priority class 'urgent'; known: "
         "high-priority, low-priority, medium-priority, system-cluster-critical, system-node-critical"),
        (f"{BASE},priority,priorityClass\n0,1,1,10,5,low-priority\n",
         "trace.csv:2: column priorityClass: give priority or priorityClass, not both"),
        (f"{BASE},maySplit\n0,1,1,10,maybe\n",
         "trace.csv:2: column maySplit: must be true, false, 1, 0, yes or no, got 'maybe'"),
        (f"{BASE},toleratedShare\n0,1,1,10,1.5\n",
         "trace.csv:2: column toleratedShare: must be a number in (0, 1], got '1.5'"),
        (f"{BASE},optimizerSharding\n0,1,1,10,zero4\n",
         "trace.csv:2: column optimizerSharding: must be one of none, zero1, zero2, zero3, fsdp, "
         "got 'zero4'"),
        (f"{PLAN}\n0,2,8,10,8,2,2\n",
         "trace.csv:2: column dataParallel: tensorParallel x pipelineParallel x dataParallel = "
         "32 must equal the job's 16 GPUs (pods x gpusPerPod)"),
        (f"{PLAN}\n0,3,4,10,4,2,\n",
         "trace.csv:2: column pipelineParallel: tensorParallel x pipelineParallel = 8 must "
         "divide the job's 12 GPUs (pods x gpusPerPod)"),
        (f"{BASE},unitPods\n0,3,8,10,2\n", "trace.csv:2: column unitPods: must divide pods (3), got 2"),
        (f"{BASE},modelParameters\n0,1,0,10,7e9\n",
         "trace.csv:2: column gpusPerPod: must be >= 1 for a job with a communication plan, got 0"),
        (f"{BASE}\n2024-05-01T10:00:00,1,1,10\n",
         "trace.csv:2: column arrival: an ISO-8601 time needs a zone (Z or +02:00), got "
         "'2024-05-01T10:00:00'"),
        (f"{BASE}\n0,1,1,10\n2024-05-01T10:00:00Z,1,1,10\n",
         "trace.csv:3: column arrival: an ISO-8601 time here but seconds on line 2: give one or "
         "the other throughout"),
        (f"id,{BASE}\na,0,1,1,10\na,5,1,1,10\n", "trace.csv:3: column id: 'a' is already the id of line 2"),
        (f"{BASE}\n", "trace.csv: no jobs"),
    ],
)  # fmt: skip
def test_each_mistake_names_the_file_line_and_column(
    text: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("trace.csv").write_text(text)
    with pytest.raises(TraceError) as caught:
        read_trace(Path("trace.csv"), "csv")
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"arrival": 0, "pods": 1.5, "gpusPerPod": 1, "duration": 5}\n',
         "trace.jsonl:1: column pods: must be an integer from 1 to 1,000,000, got 1.5"),
        ('{"arrival": 0, "pods": 1, "gpusPerPod": 1, "duration": 5, "colour": "red"}\n',
         "trace.jsonl:1: unknown column 'colour'"),
        ('\n{"arrival": 0,\n', "trace.jsonl:2: not JSON: Expecting property name enclosed in double quotes"),
        ("[1, 2]\n", "trace.jsonl:1: must be a JSON object, one job per line"),
    ],
)  # fmt: skip
def test_jsonl_mistakes_name_the_line(
    text: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("trace.jsonl").write_text(text)
    with pytest.raises(TraceError) as caught:
        read_trace(Path("trace.jsonl"), "jsonl")
    assert str(caught.value) == message


def test_every_mistake_in_the_file_is_listed_by_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"{BASE}\n0,1,1\n0,0,1,x\n0,1,1,10\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path, "csv")
    assert caught.value.problems == [
        f"{path}:2: column duration: required (or steps and stepsPerSecond)",
        f"{path}:3: column pods: must be an integer from 1 to 1,000,000, got '0'",
        f"{path}:3: column duration: must be seconds > 0, got 'x'",
    ]


def test_the_shipped_example_reads_and_the_docs_list_every_column() -> None:
    jobs = read_trace(REPO / "docs" / "examples" / "simulate" / "trace-example.csv", "csv")
    assert 10 <= len(jobs) <= 20
    assert sum(j.splittable and j.allreduce_gbps > 0 for j in jobs) >= 2
    docs = (REPO / "docs" / "simulation.md").read_text()
    assert [c for c in COLUMNS if f"| `{c}` |" not in docs] == []


def test_the_command_replays_a_csv_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "id,arrival,pods,gpusPerPod,duration,priorityClass\n"
        "first,0,1,4,100,\n"
        "second,10,2,4,50,high-priority\n"
        "third,20,1,2,30,\n"
    )
    scenario = REPO / "docs" / "examples" / "simulate" / "small-fleet.yaml"
    out = tmp_path / "out"
    args = ["simulate", "--scenario", str(scenario), "--policy", "first-fit", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--trace", f"csv:{trace}"])
    assert result.exit_code == 0, result.output
    assert "3 jobs judged on 64 GPUs" in result.output
    jobs = (out / "jobs-first-fit.csv").read_text().splitlines()
    assert [line.split(",")[:5] for line in jobs[1:]] == [
        ["first", "4", "0.0", "0.0", "100.0"],
        ["second", "8", "10.0", "10.0", "60.0"],
        ["third", "2", "20.0", "20.0", "50.0"],
    ]
    trace.write_text("arrival,pods,gpusPerPod,duration\n0,x,4,100\n")
    failed = CliRunner().invoke(app, [*args, "--trace", f"csv:{trace}"])
    assert isinstance(failed.exception, CliError)
    assert (
        str(failed.exception)
        == f"{trace}:2: column pods: must be an integer from 1 to 1,000,000, got 'x'"
    )


def test_an_elastic_width_is_read_in_units(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(f"{BASE},unitPods,minUnits\n0,8,8,60,2,2\n")
    (job,) = read_trace(path, "csv")
    assert (job.unit_pods, job.min_units) == (2, 2)
    path.write_text(f"{BASE},unitPods,minUnits\n0,8,8,60,2,5\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path, "csv")
    assert str(caught.value) == (
        f"{path}:2: column minUnits: must be at most the job's 4 units, got 5"
    )


def test_a_gfd_product_name_is_the_short_model(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("arrival,pods,gpusPerPod,duration,gpuModel\n0,1,8,60,NVIDIA-H100-80GB-HBM3\n")
    (job,) = read_trace(path, "csv")
    assert job.gpu_model == "H100"  # as the scenario's clusters name it (docs/agents.md)
