"""What Volcano accepts is accepted and what it refuses is refused (issue 24): task replicas 0,
tier 0, a HyperJob's plugins and splitPolicy (and what the placement does with it), policies
checked as Volcano's webhook checks them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.factories import example, job_document, share_layout
from volcano_global.errors import Invalid
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.jobspec.members import member_jobs, rendezvous_address
from volcano_global.rpc.shares import ShareAssignment
from volcano_global.solver.requests import job_request


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(Invalid) as caught:
        normalize_job(doc, ParseOptions())
    return {e.field: e.message for e in caught.value.errors}


def share(offset: int, pods: int, index: int, count: int, world: int) -> ShareAssignment:
    return share_layout(
        offset=offset,
        pods=pods,
        world=world,
        index=index,
        count=count,
        job_uid="u1",
        job_name="llm-training",
        namespace="default",
        rendezvous_address="x:29500",
    )


def with_idle_task(doc: dict[str, Any]) -> dict[str, Any]:
    """The job plus a second task of replicas 0 (a different pod size: it must not count)."""
    idle = copy.deepcopy(doc["spec"]["tasks"][0]) | {"name": "evaluator", "replicas": 0}
    idle["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    doc["spec"]["tasks"].append(idle)
    return doc


def test_a_task_of_replicas_0_beside_a_running_task_is_accepted_and_places_nothing() -> None:
    job = normalize_job(with_idle_task(job_document(replicas=4, gpus=8)), ParseOptions())
    assert [t.replicas for t in job.gang.tasks] == [4, 0]
    assert job.gang.total_pods == 4 and job.gang.min_available == 4
    request = job_request(
        job_id="j",
        gang=job.gang,
        split=job.split_policy,
        communication=None,
        priority=0,
        queue="q",
    )
    assert (request.pods, request.gpus_per_pod) == (4, 8)  # the idle 1-GPU task not counted


def test_a_share_never_holds_a_zero_pod_task() -> None:
    doc = with_idle_task(job_document(replicas=4, gpus=8))
    doc["spec"]["tasks"][0]["dependsOn"] = {"name": ["evaluator"]}
    (member,) = member_jobs(doc, share(0, 4, 0, 1, 4))
    assert [t["name"] for t in member["spec"]["tasks"]] == ["worker"]
    assert "dependsOn" not in member["spec"]["tasks"][0]
    assert member["spec"]["minAvailable"] == 4


def test_tier_0_is_accepted_and_planned_in_the_lowest_known_domain() -> None:
    doc = job_document(networkTopology={"mode": "hard", "highestTierAllowed": 0})
    job = normalize_job(doc, ParseOptions())
    assert job.gang.network_topology is not None
    assert job.gang.network_topology.highest_tier_allowed == 0
    request = job_request(
        job_id="j", gang=job.gang, split=job.split_policy, communication=None, priority=0, queue="q"
    )
    assert request.share_tier == 1  # never 0 (the solver's tiers start at the leaf, tier 1)


def test_hyperjob_plugins_are_accepted_as_the_crd_defines_them() -> None:
    doc = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    doc["spec"]["plugins"] = {"pytorch": ["--master=trainer"], "anything": []}
    normalize_job(doc, ParseOptions())
    doc["spec"]["plugins"] = {"pytorch": "--master=trainer"}
    assert errors_of(doc) == {
        "spec.plugins.pytorch": "must be a list of strings (the plugin's arguments)"
    }


def hyperjob(split: dict[str, Any] | None, **entry: Any) -> dict[str, Any]:
    doc = yaml.safe_load(example("hyperjob-llm-training.yaml"))  # 2 children of 16 pods x 8
    if split is not None:
        doc["spec"]["replicatedJobs"][0]["splitPolicy"] = split
    doc["spec"]["replicatedJobs"][0].update(entry)
    return doc


def test_static_split_keeps_the_children_as_written() -> None:
    job = normalize_job(hyperjob({"mode": "static", "accelerators": 256}), ParseOptions())
    assert job.split_policy.unit == "subJob" and job.split_policy.unit_pods == 16
    assert [(s.replicas, s.pods, s.split_mode) for s in job.gang.sub_jobs] == [(2, 16, "static")]
    errors = errors_of(hyperjob({"mode": "static", "accelerators": 128}))
    assert "spec.replicatedJobs[0].splitPolicy.accelerators" in errors


def test_static_split_pins_the_clusters_named() -> None:
    job = normalize_job(hyperjob({"mode": "static"}, clusterNames=["east", "west"]), ParseOptions())
    request = job_request(
        job_id="j", gang=job.gang, split=job.split_policy, communication=None, priority=0, queue="q"
    )
    assert request.allowed_clusters == ("east", "west") and request.unit_pods == 16


def test_auto_split_lets_the_placement_split_the_pool_of_accelerators() -> None:
    doc = hyperjob({"mode": "auto", "accelerators": 384, "acceleratorType": "nvidia.com/gpu"})
    job = normalize_job(doc, ParseOptions())
    assert job.gang.total_pods == 48 and job.gang.total_gpus == 384  # 384 / 8 per pod
    assert job.split_policy.mode == "auto" and job.split_policy.unit == "pods"
    assert job.split_policy.max_clusters == 2  # spec.maxDomains
    request = job_request(
        job_id="j", gang=job.gang, split=job.split_policy, communication=None, priority=0, queue="q"
    )
    assert (request.pods, request.unit_pods, request.splittable) == (48, 1, True)
    # A share of 30 pods in one cluster and 18 in another: one child Volcano Job in each.
    first = member_jobs(doc, share(0, 30, 0, 2, 48))
    second = member_jobs(doc, share(30, 18, 1, 2, 48))
    assert [m["spec"]["tasks"][0]["replicas"] for m in first + second] == [30, 18]
    assert [m["spec"]["minAvailable"] for m in first + second] == [30, 18]
    assert first[0]["metadata"]["name"].endswith("-trainer-0")


def test_auto_split_keeps_partitions_whole() -> None:
    doc = hyperjob({"mode": "auto", "accelerators": 256})
    task = doc["spec"]["replicatedJobs"][0]["templateSpec"]["tasks"][0]
    task["partitionPolicy"] = {"totalPartitions": 4, "partitionSize": 4}
    job = normalize_job(doc, ParseOptions())
    assert job.split_policy.unit_pods == 4 and job.gang.tasks[0].partition.total_partitions == 8
    (member,) = member_jobs(doc, share(8, 12, 1, 2, 32))
    assert member["spec"]["tasks"][0]["partitionPolicy"]["totalPartitions"] == 3
    doc["spec"]["replicatedJobs"][0]["splitPolicy"]["accelerators"] = 8 * 6  # 6 pods
    assert "spec.replicatedJobs[0].splitPolicy.accelerators" in errors_of(doc)


@pytest.mark.parametrize(
    ("split", "field"),
    [
        ({"mode": "manual"}, "spec.replicatedJobs[0].splitPolicy.mode"),
        ({"mode": "auto", "accelerators": 12}, "spec.replicatedJobs[0].splitPolicy.accelerators"),
        (
            {"mode": "auto", "acceleratorType": "amd.com/gpu"},
            "spec.replicatedJobs[0].splitPolicy.acceleratorType",
        ),
        ({"mode": "auto", "accelerator": 8}, "spec.replicatedJobs[0].splitPolicy.accelerator"),
    ],
)
def test_bad_split_policies_name_the_field(split: dict[str, Any], field: str) -> None:
    assert field in errors_of(hyperjob(split))


def test_auto_split_of_one_of_several_replicated_jobs_is_refused() -> None:
    doc = yaml.safe_load(example("hyperjob-heterogeneous.yaml"))
    doc["spec"]["replicatedJobs"][0]["splitPolicy"] = {"mode": "auto"}
    assert "spec.replicatedJobs[0].splitPolicy.mode" in errors_of(doc)


POLICY_CASES = [
    # (policies, field refused or None for accepted) - Volcano's validatePolicies and the CRD
    ([{"event": "PodFailed", "action": "RestartJob"}], None),
    ([{"events": ["PodFailed", "PodFailed"], "action": "RestartJob"}], None),  # deduplicated
    ([{"event": "PodFailed", "events": ["PodFailed"], "action": "AbortJob"}], None),
    ([{"exitCode": 137, "action": "RestartPod"}], None),
    ([{"exitCode": 3, "action": "NotAnAction"}], None),  # the webhook checks no exitCode action
    ([{"event": "*", "action": "AbortJob"}, {"exitCode": 1, "action": "AbortJob"}], None),
    ([{"event": "TaskCompleted", "action": "CompleteJob", "timeout": "10m"}], None),
    (
        [
            {"event": "PodFailed", "action": "RestartJob"},
            {"event": "PodFailed", "action": "AbortJob"},
        ],
        "spec.policies[1].event",
    ),
    (
        [
            {"events": ["PodEvicted"], "action": "RestartJob"},
            {"events": ["Unknown", "PodEvicted"], "action": "AbortJob"},
        ],
        "spec.policies[1].events[1]",
    ),
    ([{"events": "PodFailed", "action": "RestartJob"}], "spec.policies[0].events"),
    ([{"event": "PodRunning", "action": "RestartJob"}], "spec.policies[0].event"),
    ([{"event": "PodFailed", "action": "SyncJob"}], "spec.policies[0].action"),
    ([{"event": "PodFailed", "exitCode": 1, "action": "AbortJob"}], "spec.policies[0]"),
    ([{"action": "AbortJob"}], "spec.policies[0]"),
    ([{"exitCode": 0, "action": "AbortJob"}], "spec.policies[0].exitCode"),
    (
        [{"exitCode": 2, "action": "AbortJob"}, {"exitCode": 2, "action": "RestartJob"}],
        "spec.policies[1].exitCode",
    ),
    (
        [{"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "AbortJob"}],
        "spec.policies[0].event",
    ),
    (
        [{"event": "PodFailed", "action": "RestartJob", "timeout": "ten minutes"}],
        "spec.policies[0].timeout",
    ),
]


def test_task_policies_are_checked_too() -> None:
    doc = job_document()
    doc["spec"]["tasks"][0]["policies"] = [{"events": "PodFailed", "action": "RestartTask"}]
    assert "spec.tasks[0].policies[0].events" in errors_of(doc)


PLUGIN_CASES = [
    ({"svc": [], "env": [], "ssh": []}, None),
    ({"tfjob": []}, "spec.plugins.tfjob"),
    ({"mpi": ["--master=worker"]}, None),
    ({"mpi": []}, "spec.plugins.mpi"),  # the default master task "master" is missing
    ({"mpi": ["--master", "launcher"]}, "spec.plugins.mpi"),
]


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [("policies", *case) for case in POLICY_CASES] + [("plugins", *case) for case in PLUGIN_CASES],
)
def test_job_policies_and_plugins_as_volcano_checks_them(
    key: str, value: object, field: str | None
) -> None:
    """Accepted (`field` None) or refused naming `field`, as Volcano's webhook decides."""
    doc = job_document(**{key: value})
    if field is None:
        normalize_job(doc, ParseOptions())
    else:
        assert field in errors_of(doc)


def test_rank_0_of_a_job_led_by_a_zero_pod_task_is_the_first_pod_that_runs() -> None:
    doc = job_document(replicas=2)
    idle = copy.deepcopy(doc["spec"]["tasks"][0]) | {"name": "warmup", "replicas": 0}
    doc["spec"]["tasks"].insert(0, idle)
    address = rendezvous_address(doc, member="train-ab12", namespace="ml", split=False)
    assert address == "train-ab12-worker-0.train-ab12.ml.svc:29500"


def test_a_task_without_replicas_holds_no_rank_in_a_share() -> None:
    doc = job_document(replicas=3)
    idle = copy.deepcopy(doc["spec"]["tasks"][0]) | {"name": "warmup"}
    del idle["replicas"]
    doc["spec"]["tasks"].insert(0, idle)
    assert normalize_job(doc, ParseOptions()).gang.total_pods == 3
    (second,) = member_jobs(doc, share(1, 2, 1, 2, 3))
    assert [(t["name"], t["replicas"]) for t in second["spec"]["tasks"]] == [("worker", 2)]
    assert second["metadata"]["annotations"]["global.volcano.sh/ranks"] == "1-2"
