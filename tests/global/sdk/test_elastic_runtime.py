"""An elastic job placed narrower than its document: the member Volcano Jobs carry the world
size and data-parallel width actually placed, and the SDK runtime reads a consistent layout."""

from __future__ import annotations

from typing import Any

from tests.factories import share_layout
from volcano_global.jobspec.members import member_jobs
from volcano_global.rpc.shares import ShareAssignment
from volcano_global.sdk import Runtime

PLAN = "{tensorParallel: 8, pipelineParallel: 2, dataParallel: 8, minDataParallel: 2}"
JOB: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "llm", "annotations": {"global.volcano.sh/communication": PLAN}},
    "spec": {
        "tasks": [
            {
                "name": "worker",
                "replicas": 16,
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
            }
        ]
    },
}


def share(offset: int, pods: int, index: int) -> ShareAssignment:
    # 3 of its 8 replicas (2 pods each) placed: 4 pods in one cluster, 2 in another.
    return share_layout(
        offset=offset,
        pods=pods,
        world=6,
        index=index,
        count=2,
        job_name="llm",
        placement_id="p",
        rendezvous_address="llm-p-rdzv.ml.svc.clusterset.local:29500",
    )


def env_of(assignment: ShareAssignment, pod: int) -> dict[str, str]:
    (document,) = member_jobs(JOB, assignment)
    task = document["spec"]["tasks"][0]
    assert (
        task["replicas"] == assignment.pods and document["spec"]["minAvailable"] == assignment.pods
    )
    env = {e["name"]: e["value"] for e in task["template"]["spec"]["containers"][0]["env"]}
    return {**env, "VC_TASK_INDEX": str(pod), "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8"}


def test_the_runtime_sees_the_width_placed() -> None:
    first, second = share(0, 4, 0), share(4, 2, 1)
    env = env_of(second, 1)
    assert env["VGLOBAL_WORLD_PODS"] == "6"
    assert env["VGLOBAL_PARALLELISM"] == "tp=8,pp=2,dp=3"  # 3 of the declared 8
    rt = Runtime.from_env(env)
    assert rt.world_size == 48 and rt.layout.data_parallel == 3
    assert rt.rank == (4 + 1) * 8 + 3
    groups = rt.my_groups()
    assert groups["dp"] == [3 + 8, 3 + 8 + 16, 3 + 8 + 32]  # one member per replica placed
    assert Runtime.from_env(env_of(first, 0)).world_size == 48
