"""A share of a job as the Volcano Jobs its member cluster runs: ranks in document order,
each task keeping the replicas that fall in the share, the rest of the document kept."""

from __future__ import annotations

from typing import Any

from volcano_global.jobspec.members import member_jobs, rendezvous_address
from volcano_global.rpc.shares import ShareAssignment


def layout(offset: int, pods: int, index: int = 0, count: int = 2) -> ShareAssignment:
    return ShareAssignment(
        job_uid="u1",
        job_name="train",
        namespace="ml",
        placement_id="0123abcd-0000-0000-0000-000000000000",
        generation=3,
        rank_offset=offset,
        pods=pods,
        world_pods=12,
        cluster_index=index,
        cluster_count=count,
        rendezvous_address="train-0123abcd-rdzv.ml.svc.clusterset.local:29500",
    )


def task(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "env": [{"name": "VGLOBAL_RANK_OFFSET", "value": "x"}]}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [container]}},
        **extra,
    }


JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "train"},
    "spec": {
        "minAvailable": 12,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "tasks": [
            task("master", 2, minAvailable=2),
            task("worker", 10, partitionPolicy={"totalPartitions": 5, "partitionSize": 2}),
        ],
    },
}


def test_a_share_keeps_the_replicas_of_its_ranks() -> None:
    first = member_jobs(JOB, layout(0, 6))
    second = member_jobs(JOB, layout(6, 6, index=1))
    assert [len(first), len(second)] == [1, 1]
    a, b = first[0]["spec"], second[0]["spec"]
    assert [(t["name"], t["replicas"]) for t in a["tasks"]] == [("master", 2), ("worker", 4)]
    assert [(t["name"], t["replicas"]) for t in b["tasks"]] == [("worker", 6)]
    assert a["minAvailable"] == b["minAvailable"] == 6
    assert a["tasks"][1]["partitionPolicy"]["totalPartitions"] == 2
    assert b["tasks"][0]["partitionPolicy"]["totalPartitions"] == 3
    assert a["networkTopology"] == JOB["spec"]["networkTopology"]
    assert a["policies"]
    assert first[0]["metadata"]["name"] == "train-0123abcd"
    assert second[0]["metadata"]["labels"]["global.volcano.sh/cluster-index"] == "1"
    assert second[0]["metadata"]["annotations"]["global.volcano.sh/ranks"] == "6-11"
    env = {e["name"]: e["value"] for e in b["tasks"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["VGLOBAL_RANK_OFFSET"] == "6"  # the user's own value of the name is replaced
    assert env["VGLOBAL_CLUSTER_INDEX"] == "1"
    assert env["VGLOBAL_WORLD_PODS"] == "12"
    assert JOB["spec"]["tasks"][0]["replicas"] == 2  # the stored document is not changed


def test_a_hyperjob_share_is_its_children() -> None:
    child = {"tasks": [task("worker", 4)]}
    hyperjob = {
        "kind": "HyperJob",
        "spec": {"replicatedJobs": [{"name": "trainer", "replicas": 3, "templateSpec": child}]},
    }
    documents = member_jobs(hyperjob, layout(4, 8))
    assert [d["metadata"]["name"] for d in documents] == [
        "train-0123abcd-trainer-1",
        "train-0123abcd-trainer-2",
    ]
    assert all(d["metadata"]["annotations"]["global.volcano.sh/members"] == "2" for d in documents)


def test_rendezvous_address() -> None:
    assert (
        rendezvous_address(JOB, member="train-0123abcd", namespace="ml", split=False)
        == "train-0123abcd-master-0.train-0123abcd.ml.svc:29500"
    )
    assert rendezvous_address(JOB, member="m", namespace="ml", split=True) == (
        "m-rdzv.ml.svc.clusterset.local:29500"
    )
