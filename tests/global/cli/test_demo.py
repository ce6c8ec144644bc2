"""`vglobal demo`, the README's main command, runs the whole story end to end: real
processes (server, three agents), gRPC, SQLite, CP-SAT, on a compressed clock."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core_agent.simulated.cluster import SimulatedCluster
from tests.factories import EXAMPLES
from volcano_global.cli.demo import CLUSTERS


def test_the_demo_tells_the_whole_story_and_ends_by_itself(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "volcano_global.cli.main",
            "demo",
            "--data-dir",
            str(tmp_path),
            "--examples",
            str(EXAMPLES),
            "--time-scale",
            "0.005",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "250"},  # placement lines unwrapped
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "H100 1432/1432" in out  # a real Lingjun aggregation block, 179 hosts x 8 GPUs
    assert "A100 4096/4096" in out
    assert "L40S 128/128" in out  # the two YAML-specified clusters
    # The split job: over the two H100 clusters, with its bandwidth on their link.
    assert re.search(
        # Placed, or already further: the poll can miss a state dispatch moves past at once.
        r"llm/pretrain-405b: (Placed|Dispatched|Running) - \d+ pods in gpu-\w+; "
        r"\d+ pods in gpu-\w+; "
        r"300 Gbps on gpu-(central<->gpu-east|east<->gpu-central)",
        out,
    )
    # The job that has to wait for bandwidth says so, in numbers, then runs once it frees.
    assert re.search(
        r"link gpu-(central<->gpu-east|east<->gpu-central) has 100 Gbps free, the split needs 300",
        out,
    )
    assert out.index("llm/pretrain-405b: Succeeded") < out.index("llm/finetune-moe: Running")
    # ...and then whole, in one cluster, as the README tells it (not split).
    assert re.search(
        r"llm/finetune-moe: (Placed|Dispatched|Running) - 104 pods in gpu-\w+$", out, re.M
    )
    # Data: one job stages its dataset where H100s are free, one waits for its dataset's cluster.
    assert re.search(
        r"llm/sft-8b .* 16 pods in gpu-\w+; staging sft-mix \(2 TiB\) from gpu-west to gpu-\w+ at "
        r"100 Gbps",
        out,
    )
    assert (
        "llm/pretrain-8b: Pending - dataset web-corpus (300 TiB) is in gpu-central; staging to "
        "gpu-east at 100 Gbps takes 7.3 h; gpu-central has room in about"
    ) in out
    assert re.search(
        r"llm/pretrain-8b: (Placed|Dispatched|Running) - 64 pods in gpu-central$", out, re.M
    )
    # A wait that only counts down ("room expected in about 2,399 s", then 2,398 s) is printed
    # when it says something new, not once a poll (about 15 lines here without that rule).
    assert len(re.findall(r"llm/finetune-moe: Pending", out)) <= 8
    for job in (
        "pretrain-405b", "eval-70b", "finetune-moe", "sweep-a100", "sft-8b", "pretrain-8b"
    ):  # fmt: skip
        assert f"{job}: Succeeded" in out
    for job in ("pretrain-405b", "finetune-moe"):  # long enough that a poll always sees it run
        assert f"{job}: Running" in out
    assert "The web console is at http://127.0.0.1:" in out
    assert (tmp_path / "demo.db").exists()


def test_every_demo_cluster_has_an_example_spec() -> None:
    for name, args, _ in CLUSTERS:
        assert args[0] == "--spec" and (EXAMPLES / args[1]).is_file(), name
        assert SimulatedCluster.from_yaml(name, EXAMPLES / args[1]).nodes, name


@pytest.mark.parametrize(
    ("after", "started"),
    [
        ("inter-cluster links and queues", 4),  # every inventory arrived: all four run
        ("member clusters, each with its own agent", 2),  # agents starting, inventories awaited
    ],
)
def test_sigterm_stops_the_demo_with_its_server_and_agents(
    tmp_path: Path, after: str, started: int
) -> None:
    """`timeout` and CI stop the demo with SIGTERM: its server and agents must not outlive it,
    also when it comes while the agents start."""
    demo = subprocess.Popen(
        [
            *[sys.executable, "-m", "volcano_global.cli.main", "demo"],
            *["--data-dir", str(tmp_path), "--examples", str(EXAMPLES), "--time-scale", "0.005"],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
    )
    children: list[int] = []
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            if after in line:
                break
        deadline = time.monotonic() + 30
        while len(children := _children(demo.pid)) < started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(children) >= started, children  # the server, and agents
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=45)
        children = sorted(set(children) | set(_started_agents(tmp_path)))
        assert demo.returncode == 128 + signal.SIGTERM
    finally:
        demo.kill()
        left = [pid for pid in children if _alive(pid)]
        for pid in left:  # not to leave them to the next tests
            os.kill(pid, signal.SIGKILL)
    assert left == []


def _started_agents(data_dir: Path) -> list[int]:
    """This demo's agents still running, whoever their parent now is: their output goes to
    their logs in its data dir (one started just before the signal is not yet a child seen)."""
    found = []
    for out in Path("/proc").glob("[0-9]*/fd/1"):
        try:
            target = os.readlink(out)
        except OSError:  # it ended meanwhile, or not ours to read
            continue
        if target.startswith(f"{data_dir}/agent-"):
            found.append(int(out.parent.parent.name))
    return found


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
