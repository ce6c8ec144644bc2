"""The runtime helper's rank layout: across shares split over 2 and 3 clusters, every TP, CP
and PP group stays inside one cluster (TP inside one pod) and every DP group spans the clusters
as placed; and it reads exactly the environment the agent's member Volcano Jobs carry."""

from __future__ import annotations

import copy

import pytest

from tests.factories import job_document as factory_job_document
from tests.factories import share_layout
from volcano_global.jobspec.members import member_jobs
from volcano_global.sdk import Layout, LayoutError, ParallelPlan, Runtime, job_document

PLAN = ParallelPlan(tensor_parallel=4, pipeline_parallel=2, context_parallel=2, data_parallel=6)


def env_for(offset: int, pods: int, index: int, count: int, world_pods: int) -> dict[str, str]:
    """The environment the agent injects for one share (built through the real code path)."""
    doc = job_document(PLAN, name="t", image="i")
    layout = share_layout(
        offset=offset,
        pods=pods,
        world=world_pods,
        index=index,
        count=count,
        job_name="t",
        placement_id="p" * 8,
        rendezvous_address="t-pppppppp-rdzv.ml.svc.clusterset.local:29500",
    )
    (member,) = member_jobs(doc, layout)
    container = member["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.mark.parametrize("split", [[4, 8], [2, 4, 6]], ids=["2 clusters", "3 clusters"])
def test_groups_stay_in_a_cluster_and_only_dp_crosses(split: list[int]) -> None:
    """Shares of 2 pods per DP replica (16 GPUs: TP4 x CP2 x PP2, 8 GPUs per pod)."""
    world_pods = PLAN.facts().world_pods  # 12 pods x 8 = 96 = 16 x 6
    assert sum(split) == world_pods
    cluster_of: dict[int, int] = {}
    pod_of: dict[int, int] = {}
    offset = 0
    for index, pods in enumerate(split):
        env = env_for(offset, pods, index, len(split), world_pods)
        for pod in range(pods):
            for local in range(8):
                runtime = Runtime.from_env(
                    {**env, "VC_TASK_INDEX": str(pod), "LOCAL_RANK": str(local)}, procs_per_pod=8
                )
                assert runtime.rank not in cluster_of  # every rank exactly once
                cluster_of[runtime.rank] = index
                pod_of[runtime.rank] = offset + pod
        offset += pods
    layout = runtime.layout
    assert sorted(cluster_of) == list(range(96))
    assert layout.data_parallel == 6
    for kind in ("tp", "cp", "pp"):
        for group in layout.groups(kind):
            assert len({cluster_of[r] for r in group}) == 1, (kind, group)
    for group in layout.groups("tp"):
        assert len({pod_of[r] for r in group}) == 1  # TP inside one node
    replicas_per_cluster = [pods * 8 // layout.unit for pods in split]
    for group in layout.groups("dp"):
        members = [cluster_of[r] for r in group]
        assert [members.count(c) for c in range(len(split))] == replicas_per_cluster


def test_layout_order_is_tp_innermost() -> None:
    layout = Layout(tensor_parallel=2, context_parallel=1, pipeline_parallel=2, data_parallel=2)
    assert layout.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert layout.groups("pp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert layout.groups("dp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert layout.coordinates(6) == {"tp": 0, "cp": 0, "pp": 1, "dp": 1}
    assert layout.rank(tp=0, pp=1, dp=1) == 6


def test_the_parallelism_comes_from_the_communication_declaration() -> None:
    env = env_for(0, 4, 0, 3, 12)
    assert env["VGLOBAL_PARALLELISM"] == "tp=4,pp=2,cp=2,dp=6"
    runtime = Runtime.from_env({**env, "VC_TASK_INDEX": "1", "LOCAL_RANK": "3"}, procs_per_pod=8)
    assert runtime.rank == 11
    assert runtime.world_size == 96
    assert runtime.master_addr == "t-pppppppp-rdzv.ml.svc.clusterset.local"
    assert runtime.torchrun_args() == [
        "--nnodes=12",
        "--node-rank=1",
        "--nproc-per-node=8",
        "--master-addr=t-pppppppp-rdzv.ml.svc.clusterset.local",
        "--master-port=29500",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"VGLOBAL_WORLD_PODS": None}, "VGLOBAL_WORLD_PODS is not set"),
        ({"VGLOBAL_RENDEZVOUS_ADDR": "nohost"}, "must be host:port"),
        ({"VGLOBAL_RANK_OFFSET": "1"}, "cuts a data-parallel replica of 16 ranks"),
        ({"VGLOBAL_PARALLELISM": "tp=4,pp=2,cp=2,dp=5"}, "says dp=5, the world gives 6"),
        ({"VGLOBAL_PARALLELISM": "tp=x"}, "is not tp|pp|cp|dp|ep=N"),
        ({"VC_TASK_INDEX": "7"}, "pod index 7 is outside this share of 4"),
    ],
)
def test_a_bad_environment_is_refused_with_the_reason(
    change: dict[str, str | None], message: str
) -> None:
    env: dict[str, str] = {**env_for(0, 4, 0, 3, 12), "VC_TASK_INDEX": "0"}
    for key, value in change.items():
        if value is None:
            env.pop(key)
        else:
            env[key] = value
    with pytest.raises(LayoutError, match=message.replace("|", r"\|")):
        Runtime.from_env(env, procs_per_pod=8)


@pytest.mark.parametrize("split", [[6], [4, 2], [1, 5]], ids=["whole", "4+2", "1+5"])
def test_a_job_of_several_gpu_tasks_gives_every_pod_its_own_rank(split: list[int]) -> None:
    """Before: a pod's place in its share was Volcano's VC_TASK_INDEX alone, which counts
    within the task: the pods of a second GPU task took the first task's ranks (two rank 0s).
    After: the agent gives each task its first pod's place in the share."""
    doc = factory_job_document("two", replicas=3)
    second = copy.deepcopy(doc["spec"]["tasks"][0])
    second["name"] = "critic"
    doc["spec"]["tasks"].append(second)
    ranks: list[int] = []
    offset = 0
    for index, pods in enumerate(split):
        share = share_layout(offset=offset, pods=pods, world=6, index=index, count=len(split))
        for member in member_jobs(doc, share):
            for task in member["spec"]["tasks"]:
                container = task["template"]["spec"]["containers"][0]
                env = {e["name"]: e["value"] for e in container["env"]}
                for pod in range(task["replicas"]):
                    runtime = Runtime.from_env({**env, "VC_TASK_INDEX": str(pod)}, procs_per_pod=1)
                    ranks.append(runtime.rank)
        offset += pods
    assert sorted(ranks) == list(range(6))


def test_an_agent_from_before_the_task_offset_reads_as_before() -> None:
    env = env_for(0, 4, 0, 2, PLAN.facts().world_pods)
    del env["VGLOBAL_TASK_POD_OFFSET"]
    runtime = Runtime.from_env({**env, "VC_TASK_INDEX": "3"}, procs_per_pod=8)
    assert runtime.pod_index == 3
