"""A share of a job as the Volcano Jobs its member cluster runs: ranks in document order,
each task keeping the replicas that fall in the share, the rest of the document kept; names
Volcano and Kubernetes accept; units that hold whole partitions."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from volcano_global.errors import Invalid
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.jobspec.members import (
    member_job_name,
    member_jobs,
    ranks_gpu_model,
    rendezvous_address,
)
from volcano_global.rpc.shares import ShareAssignment
from volcano_global.settings import SchedulingDefaults

PLACEMENT = "0123abcd-0000-0000-0000-000000000000"
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def layout(
    offset: int, pods: int, index: int = 0, count: int = 2, *, job_name: str = "train"
) -> ShareAssignment:
    return ShareAssignment(
        job_uid="u1",
        job_name=job_name,
        namespace="ml",
        placement_id=PLACEMENT,
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
    assert first[0]["metadata"]["name"] == member_job_name("train", PLACEMENT, manifest=JOB)
    assert re.fullmatch(r"train-[0-9a-f]{8}", first[0]["metadata"]["name"])
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
    member = member_job_name("train", PLACEMENT, manifest=hyperjob)
    assert [d["metadata"]["name"] for d in documents] == [
        f"{member}-trainer-1",
        f"{member}-trainer-2",
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


def test_the_users_labels_annotations_and_min_success_are_kept() -> None:
    job = copy.deepcopy(JOB)
    job["metadata"]["labels"] = {"team": "llm", "global.volcano.sh/placement": "forged"}
    job["metadata"]["annotations"] = {
        "volcano.sh/preemptable": "true",
        "volcano.sh/revocable-zone": "*",
        "volcano.sh/cooldown-time": "600s",
    }
    job["spec"]["minSuccess"] = 9
    first = member_jobs(job, layout(0, 6))[0]
    second = member_jobs(job, layout(6, 6, index=1))[0]
    labels, annotations = first["metadata"]["labels"], first["metadata"]["annotations"]
    assert labels["team"] == "llm"
    assert labels["global.volcano.sh/placement"] == PLACEMENT  # the Global's label wins
    assert annotations["volcano.sh/preemptable"] == "true"
    assert annotations["volcano.sh/cooldown-time"] == "600s"
    assert annotations["global.volcano.sh/ranks"] == "0-5"
    # 9 of 12 pods, split 6 + 6: each share needs 5, so both Completed means >= 9 succeeded.
    assert first["spec"]["minSuccess"] == second["spec"]["minSuccess"] == 5
    one_cluster = member_jobs(job, layout(0, 12, count=1))[0]
    assert one_cluster["spec"]["minSuccess"] == 9  # unsplit: exactly the user's
    assert "minSuccess" not in member_jobs(JOB, layout(0, 6))[0]["spec"]


def _volcano_accepts_and_runs(job: dict[str, Any]) -> bool:
    """What Volcano needs of the user's own job to run it in one cluster: a name of at most 63
    characters, and every pod name `<job>-<task>-<n>` a DNS label (the webhook checks n = the
    task's position, the `svc` plugin makes the pod name the hostname)."""
    name = job["metadata"]["name"]
    tasks = job["spec"]["tasks"]
    pods = [f"{name}-{t['name']}-{max(i, t['replicas'] - 1)}" for i, t in enumerate(tasks)]
    return len(name) <= 63 and all(len(p) <= 63 for p in pods)


def _longest_job(name_length: int, replicas: int, tasks: int) -> dict[str, Any]:
    """A job at Volcano's limits: its name as long as asked, then task names as long as its
    pod names allow."""
    name = ("a1." * 30)[: name_length - 1] + "z"
    digits = len(str(max(replicas - 1, tasks - 1)))
    room = 63 - name_length - digits - 2
    names = [chr(ord("a") + i) + "w" * (room - 1) for i in range(tasks)]
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": [task(n, replicas) for n in names]},
    }
    assert _volcano_accepts_and_runs(job)
    return job


@pytest.mark.parametrize(
    ("name_length", "replicas", "tasks"),
    [
        *((n, r, t) for n in (5, 9, 20, 48, 55) for r, t in ((1, 1), (16, 2), (1000, 3))),
        (59, 1, 1),  # the longest job name Volcano's webhook lets through: `<59>-a-0`
    ],
)
def test_every_name_fits_for_the_longest_names_volcano_runs(
    name_length: int, replicas: int, tasks: int
) -> None:
    job = _longest_job(name_length, replicas, tasks)
    name = job["metadata"]["name"]
    world = replicas * tasks
    share = ShareAssignment(
        **{**layout(0, world, job_name=name).to_payload(), "world_pods": world, "pods": world}
    )
    (member,) = member_jobs(job, share)
    base = member["metadata"]["name"]
    assert base == member_job_name(name, PLACEMENT, manifest=job)  # what the Global sends
    assert DNS1035.match(base) and len(base) <= 63  # the svc plugin's Service
    assert DNS1035.match(base + "-rdzv") and len(base + "-rdzv") <= 63
    for t in member["spec"]["tasks"]:
        for pod in (f"{base}-{t['name']}-0", f"{base}-{t['name']}-{t['replicas'] - 1}"):
            assert DNS1123_LABEL.match(pod) and len(pod) <= 63, pod


def test_a_48_character_name_keeps_its_length_and_its_placements_apart() -> None:
    job = copy.deepcopy(JOB)
    name = "x" * 48
    a = member_job_name(name, PLACEMENT, manifest=job)
    b = member_job_name(name, "ffffffff-0000-0000-0000-000000000000", manifest=job)
    assert a != b  # a requeued job's new placement never meets the old leftovers
    assert a == member_job_name(name, PLACEMENT, manifest=job)  # stable: found after restarts
    # As much of the name as the longest pod name (`-worker-9`) leaves room for: it was 57
    # characters (pods 66) and is now 54 (pods 63).
    assert a.startswith("x" * 45) and len(f"{a}-worker-9") == 63
    longest = member_job_name("y" * 63, PLACEMENT, manifest=job)
    assert len(f"{longest}-worker-9") <= 63 and len(f"{longest}-rdzv") <= 63
    # A name Volcano takes but a Service does not (dots, a leading digit) still gives a label.
    odd = member_job_name("7b.llama-sft", PLACEMENT, manifest=job)
    assert DNS1035.match(odd) and odd.startswith("b-llama-sft-")


OPTIONS = ParseOptions(
    priority_classes=SchedulingDefaults().priority_classes, default_max_clusters=4
)


def _partitioned(**annotations: str) -> dict[str, Any]:
    """A worker task of 2-pod partitions that starts at rank 1, behind a 1-pod master."""
    partition = {"totalPartitions": 2, "partitionSize": 2}
    gpu = {"resources": {"limits": {"nvidia.com/gpu": "8"}}}
    tasks = [
        task("master", 1),
        task("worker", 4, partitionPolicy=partition),
        task("chief", 1),
    ]
    for t in tasks:
        t["template"]["spec"]["containers"][0].update(gpu)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "annotations": {"global.volcano.sh/split": "auto", **annotations},
        },
        "spec": {"tasks": tasks},
    }


def test_split_units_hold_whole_partitions() -> None:
    # A unit of 2 (the partition size) used to be taken: the boundary at rank 2 then gave the
    # first share one worker, `totalPartitions: 0`, which Volcano refuses.
    job = _partitioned()
    unit = normalize_job(job, OPTIONS).split_policy.unit_pods
    assert unit == 3
    for offset in (0, 3):
        (member,) = member_jobs(job, layout(offset, 3))
        (worker,) = [t for t in member["spec"]["tasks"] if t["name"] == "worker"]
        assert worker["replicas"] == 2
        assert worker["partitionPolicy"]["totalPartitions"] == 1
    with pytest.raises(Invalid) as refused:
        normalize_job(_partitioned(**{"global.volcano.sh/unit-pods": "2"}), OPTIONS)
    assert "would cut task 'worker'" in str(refused.value.errors[0].message)
    with pytest.raises(ValueError, match="not whole partitions"):
        member_jobs(job, layout(0, 2))  # a share the Global never sends


def test_a_dependency_on_a_task_in_another_cluster_is_left_out() -> None:
    job = copy.deepcopy(JOB)
    job["spec"]["tasks"][1]["dependsOn"] = {"name": ["master"]}
    job["spec"]["tasks"][1].pop("partitionPolicy")
    # Volcano refuses a worker that depends on a master its Job lacks (no DAG).
    (second,) = member_jobs(job, layout(6, 6, index=1))
    assert [t["name"] for t in second["spec"]["tasks"]] == ["worker"]
    assert "dependsOn" not in second["spec"]["tasks"][0]
    (first,) = member_jobs(job, layout(0, 6))  # both tasks here: Volcano orders them
    assert first["spec"]["tasks"][1]["dependsOn"] == {"name": ["master"]}


def test_a_dotted_job_name_gives_a_dns_1035_member_name() -> None:
    # `llama3.1-pretrain` is a valid Job name (a DNS subdomain); a Service name is not.
    member = member_job_name("llama3.1-pretrain", PLACEMENT, manifest=JOB)
    assert re.fullmatch(r"llama3-1-pretrain-[0-9a-f]{8}", member), member


def _gpu_task(name: str, replicas: int, model: str) -> dict[str, Any]:
    spec = task(name, replicas)
    pod = spec["template"]["spec"]
    pod["nodeSelector"] = {"nvidia.com/gpu.product": model}
    pod["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    return spec


def test_a_task_of_no_replicas_is_no_model_of_a_share() -> None:
    # The A100 task has no pods (the solver does not count it): the share's ranks are H100s.
    job = copy.deepcopy(JOB)
    job["spec"] = {
        "minAvailable": 4,
        "tasks": [
            _gpu_task("first", 2, "H100"),
            _gpu_task("none", 0, "A100"),
            _gpu_task("second", 2, "H100"),
        ],
    }
    gang = normalize_job(job, OPTIONS).gang
    assert ranks_gpu_model(gang, 0, 4) == "H100"
