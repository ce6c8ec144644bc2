"""A real torch.distributed run on the CPU (gloo, loopback): processes started as the pods of
two or three "clusters", each with the environment the agent injects into its share's Volcano
Job, form the groups the runtime helper computes, and an all-reduce across them sums right.
Only the rendezvous host is replaced by 127.0.0.1 (cross-cluster networking is out of scope).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import share_layout
from tests.server_process import free_port
from volcano_global.jobspec.members import member_jobs
from volcano_global.sdk import ParallelPlan, job_document

WORKER = Path(__file__).with_name("torch_worker.py")
REPO = Path(__file__).resolve().parents[3]


def share_env(plan: ParallelPlan, offset: int, pods: int, index: int, count: int) -> dict[str, str]:
    layout = share_layout(
        offset=offset,
        pods=pods,
        world=plan.facts().world_pods,
        index=index,
        count=count,
        rendezvous_address="train-0123abcd-rdzv.ml.svc.clusterset.local:29500",
    )
    (member,) = member_jobs(job_document(plan, name="train", image="i"), layout)
    container = member["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.mark.parametrize("clusters", [2, 3])
def test_all_reduce_across_clusters_with_the_helpers_groups(tmp_path: Path, clusters: int) -> None:
    # TP=2 inside each 2-GPU pod, one DP replica (one pod) per cluster.
    plan = ParallelPlan(tensor_parallel=2, gpus_per_pod=2, data_parallel=clusters)
    port = free_port()
    processes = []
    for index in range(clusters):
        env = share_env(plan, offset=index, pods=1, index=index, count=clusters)
        env["VGLOBAL_RENDEZVOUS_ADDR"] = f"127.0.0.1:{port}"
        for local_rank in range(2):
            out = tmp_path / f"c{index}-r{local_rank}.json"
            process_env = {
                **os.environ,
                **env,
                "VC_TASK_INDEX": "0",
                "LOCAL_RANK": str(local_rank),
                "LOCAL_WORLD_SIZE": "2",
                "PYTHONPATH": str(REPO),
                "OMP_NUM_THREADS": "1",
            }
            processes.append(
                subprocess.Popen(
                    [sys.executable, str(WORKER), str(out)],
                    env=process_env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
    for process in processes:
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output.decode()
    results = {}
    for path in tmp_path.glob("c*-r*.json"):
        result = json.loads(path.read_text())
        results[result["rank"]] = (path.name, result)
    world = 2 * clusters
    assert sorted(results) == list(range(world))
    for rank, (name, result) in results.items():
        cluster = int(name[1])
        assert rank // 2 == cluster  # ranks follow the shares' rank offsets
        assert result["groups"]["tp"] == [2 * cluster, 2 * cluster + 1]  # inside the pod
        assert result["tp_sum"] == 4 * cluster + 1
        dp_group = [rank % 2 + 2 * c for c in range(clusters)]  # one member per cluster
        assert result["groups"]["dp"] == dp_group
        assert result["dp_sum"] == sum(dp_group)
        assert result["world_sum"] == world * (world - 1) / 2
