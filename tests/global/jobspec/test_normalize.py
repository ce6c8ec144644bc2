"""The unified job API's parser on real Volcano shapes and on malformed documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.factories import EXAMPLES, job_document
from tests.factories import example_document as example
from volcano_global.errors import Invalid
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.settings import SchedulingDefaults

OPTIONS = ParseOptions(
    priority_classes=SchedulingDefaults().priority_classes, default_max_clusters=4
)


def parse(doc: dict[str, Any]):  # type: ignore[no-untyped-def]
    return normalize_job(doc, OPTIONS)


def errors_of(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(Invalid) as caught:
        parse(doc)
    return {e.field: e.message for e in caught.value.errors}


JOB_EXAMPLES = [
    p
    for p in sorted(EXAMPLES.glob("*.yaml"))
    if next(yaml.safe_load_all(p.read_text())).get("kind") in ("Job", "HyperJob")
]  # the others are the README's Queue and PriorityClass (tests/global/api/test_apply.py)


def test_the_examples_are_jobs_but_the_readmes_queue_and_priority_class() -> None:
    others = sorted(p.name for p in set(EXAMPLES.glob("*.yaml")) - set(JOB_EXAMPLES))
    assert others == ["priorityclass-urgent.yaml", "queue-llm.yaml"]


@pytest.mark.parametrize("path", JOB_EXAMPLES, ids=lambda p: p.name)
def test_every_shipped_example_parses(path) -> None:  # type: ignore[no-untyped-def]
    job = parse(example(path.name))
    assert job.gang.total_pods > 0


def test_llm_pretraining_job_is_a_splittable_gang_of_512_gpus() -> None:
    job = parse(example("llm-pretrain-64x8.yaml"))
    assert (job.kind, job.namespace, job.name, job.queue) == (
        "Job",
        "llm",
        "llama-70b-pretrain",
        "llm",
    )
    assert job.priority == 1000
    assert job.gang.total_pods == 64
    assert job.gang.total_gpus == 512
    assert job.gang.gpu_model == "H100"
    (task,) = job.gang.tasks
    assert task.resources.gpus == 8
    assert task.resources.cpu_millis == 96_000
    assert task.resources.memory_bytes == 1600 * 2**30
    assert task.partition is not None
    assert task.partition.partition_size == 4
    assert task.partition.network_topology.highest_tier_allowed == 1
    assert job.gang.network_topology.mode == "soft"
    assert job.communication is not None
    assert (job.communication.tensor_parallel, job.communication.data_parallel) == (8, 16)
    assert job.communication.unit_gpus == 32
    policy = job.split_policy
    assert (policy.mode, policy.unit_pods, policy.max_clusters, policy.source) == (
        "auto",
        4,
        3,
        "communication",
    )


def test_plain_job_without_declaration_is_never_split() -> None:
    job = parse(example("pytorch-job.yaml"))
    assert job.split_policy.mode == "never"
    assert job.split_policy.max_clusters == 1
    assert [t.name for t in job.gang.tasks] == ["master", "worker"]
    assert job.gang.min_available == 3
    assert job.gang.total_gpus == 24


def test_hyperjob_units_are_whole_child_jobs() -> None:
    job = parse(example("hyperjob-llm-training.yaml"))
    assert job.kind == "HyperJob"
    assert job.queue == "llm"
    (sub,) = job.gang.sub_jobs
    assert (sub.replicas, sub.pods, sub.gpus) == (2, 16, 128)
    assert job.gang.total_gpus == 256
    assert job.gang.min_sub_jobs == 2
    assert (job.split_policy.unit, job.split_policy.max_clusters) == ("subJob", 2)


def test_heterogeneous_hyperjob_keeps_models_and_cluster_names() -> None:
    job = parse(example("hyperjob-heterogeneous.yaml"))
    assert {t.gpu_model for t in job.gang.tasks} == {"H100", "A100"}
    assert job.gang.gpu_model is None
    assert [s.cluster_names for s in job.gang.sub_jobs] == [["gpu-east"], ["gpu-west"]]


def test_pod_resources_follow_kube_scheduler_rules() -> None:
    doc = job_document()
    spec = doc["spec"]["tasks"][0]["template"]["spec"]
    spec["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"nvidia.com/gpu": 8},
    }
    spec["containers"].append({"name": "sidecar-like", "resources": {"requests": {"cpu": "250m"}}})
    spec["initContainers"] = [
        {"name": "fetch", "resources": {"requests": {"cpu": "4", "memory": "512Mi"}}},
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
    ]
    (task,) = parse(doc).gang.tasks
    # cpu: max(0.5 + 0.25, init 4) = 4 cores; memory: containers 1Gi + sidecar 1Gi = 2Gi
    assert task.resources.cpu_millis == 4000
    assert task.resources.memory_bytes == 2 * 2**30
    assert task.resources.gpus == 8


@pytest.mark.parametrize(
    ("value", "preemptable"), [(None, True), ("false", False), ("true", True), ("False", True)]
)
def test_only_preemptable_false_keeps_a_job_from_eviction(
    value: str | None, preemptable: bool
) -> None:
    # As the rounds read Volcano's annotation before it was parsed: exactly "false" only.
    document = job_document()
    if value is not None:
        document["metadata"]["annotations"] = {"volcano.sh/preemptable": value}
    assert parse(document).preemptable is preemptable


def test_generate_name_gets_a_random_suffix() -> None:
    doc = job_document()
    doc["metadata"] = {"generateName": "sweep-"}
    name = parse(doc).name
    assert name.startswith("sweep-")
    assert len(name) == len("sweep-") + 5


def test_communication_can_derive_data_parallel_and_unit() -> None:
    doc = job_document(replicas=16)
    doc["metadata"]["annotations"] = {
        "global.volcano.sh/communication": "{tensorParallel: 8, pipelineParallel: 2}"
    }
    job = parse(doc)
    assert job.communication is not None
    assert job.communication.data_parallel == 8
    assert job.split_policy.unit_pods == 2
    assert job.split_policy.mode == "auto"


def test_split_annotations_override_defaults() -> None:
    doc = job_document(replicas=12)
    doc["metadata"]["annotations"] = {
        "global.volcano.sh/split": "auto",
        "global.volcano.sh/unit-pods": "3",
        "global.volcano.sh/max-clusters": "2",
        "global.volcano.sh/min-share-pods": "6",
    }
    policy = parse(doc).split_policy
    assert (policy.mode, policy.unit_pods, policy.max_clusters, policy.min_share_pods) == (
        "auto",
        3,
        2,
        6,
    )


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    target = doc
    keys = path.split("/")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    if value is _DELETE:
        del target[last]
    elif last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value
    return doc


_DELETE = object()
TASK = "spec/tasks/0"
CONTAINER = f"{TASK}/template/spec/containers/0"

MALFORMED = [
    ("replicas -1", f"{TASK}/replicas", -1, "spec.tasks[0].replicas", "must be >= 0"),
    (
        "only task replicas 0",
        f"{TASK}/replicas",
        0,
        "spec.tasks",
        "every task has replicas: 0; the job has no pods to run",
    ),
    ("replicas string", f"{TASK}/replicas", "2", "spec.tasks[0].replicas", "must be an integer"),
    ("replicas bool", f"{TASK}/replicas", True, "spec.tasks[0].replicas", "must be an integer"),
    (
        "missing replicas (0, as in Volcano)",
        f"{TASK}/replicas",
        _DELETE,
        "spec.tasks",
        "every task has replicas: 0; the job has no pods to run",
    ),
    ("typo in spec", "spec/minAvaliable", 2, "spec.minAvaliable", "unknown field"),
    ("typo in task", f"{TASK}/replica", 2, "spec.tasks[0].replica", "unknown field"),
    (
        "task min > replicas",
        f"{TASK}/minAvailable",
        3,
        "spec.tasks[0].minAvailable",
        "must be <= replicas (2)",
    ),
    (
        "job min > total",
        "spec/minAvailable",
        9,
        "spec.minAvailable",
        "must be <= the total replicas of all tasks (2)",
    ),
    (
        "bad cpu",
        f"{CONTAINER}/resources",
        {"requests": {"cpu": "two"}},
        "spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
        "invalid quantity 'two'",
    ),
    (
        "fractional gpu",
        f"{CONTAINER}/resources",
        {"limits": {"nvidia.com/gpu": "0.5"}},
        'spec.tasks[0].template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        "must be a whole number of devices",
    ),
    (
        "gpu request != limit",
        f"{CONTAINER}/resources",
        {"requests": {"nvidia.com/gpu": 4}, "limits": {"nvidia.com/gpu": 8}},
        'spec.tasks[0].template.spec.containers[0].resources.requests["nvidia.com/gpu"]',
        "must equal the limit (extended resources cannot be overcommitted)",
    ),
    (
        "no containers",
        f"{TASK}/template/spec/containers",
        [],
        "spec.tasks[0].template.spec.containers",
        "must not be empty",
    ),
    (
        "container without name",
        f"{CONTAINER}/name",
        _DELETE,
        "spec.tasks[0].template.spec.containers[0].name",
        "required",
    ),
    ("no template", f"{TASK}/template", _DELETE, "spec.tasks[0].template", "required"),
    ("no tasks", "spec/tasks", [], "spec.tasks", "must not be empty"),
    (
        "bad topology mode",
        "spec/networkTopology",
        {"mode": "strict"},
        "spec.networkTopology.mode",
        "must be hard or soft",
    ),
    (
        "both tier fields",
        "spec/networkTopology",
        {"highestTierAllowed": 2, "highestTierName": "spine"},
        "spec.networkTopology",
        "highestTierAllowed and highestTierName cannot both be set",
    ),
    (
        "tier -1",
        "spec/networkTopology",
        {"highestTierAllowed": -1},
        "spec.networkTopology.highestTierAllowed",
        "must be >= 0",
    ),
    (
        "partition mismatch",
        f"{TASK}/partitionPolicy",
        {"totalPartitions": 3, "partitionSize": 1},
        "spec.tasks[0].partitionPolicy",
        "totalPartitions x partitionSize (3 x 1 = 3) must equal replicas (2)",
    ),
    (
        "bad task name",
        f"{TASK}/name",
        "Worker_1",
        "spec.tasks[0].name",
        "'Worker_1' is not a valid name: at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit",
    ),
    (
        "bad job name",
        "metadata/name",
        "Train!",
        "metadata.name",
        "'Train!' is not a valid name: at most 63 lowercase letters, digits, '-' or '.', each part between dots starting and ending with a letter or digit",
    ),
    ("no name", "metadata/name", _DELETE, "metadata.name", "required (or metadata.generateName)"),
    (
        "unknown priority class",
        "spec/priorityClassName",
        "urgent",
        "spec.priorityClassName",
        "unknown priority class 'urgent' (known: high-priority, low-priority, medium-priority)",
    ),
    (
        "numeric annotation",
        "metadata/annotations",
        {"global.volcano.sh/max-clusters": 2},
        'metadata.annotations["global.volcano.sh/max-clusters"]',
        "must be a string (annotation values are strings; quote numbers)",
    ),
    (
        "unknown global annotation",
        "metadata/annotations",
        {"global.volcano.sh/maxclusters": "2"},
        'metadata.annotations["global.volcano.sh/maxclusters"]',
        "unknown annotation; known: global.volcano.sh/communication, global.volcano.sh/crossing-gbps, global.volcano.sh/elastic, global.volcano.sh/gang-start-timeout, global.volcano.sh/gpu-model, global.volcano.sh/max-clusters, global.volcano.sh/min-share-pods, global.volcano.sh/split, global.volcano.sh/unit-pods",
    ),
    (
        "gang start timeout not positive",
        "metadata/annotations",
        {"global.volcano.sh/gang-start-timeout": "0"},
        'metadata.annotations["global.volcano.sh/gang-start-timeout"]',
        "must be >= 1",
    ),
    (
        "split unit not dividing",
        "metadata/annotations",
        {"global.volcano.sh/split": "auto", "global.volcano.sh/unit-pods": "3"},
        'metadata.annotations["global.volcano.sh/unit-pods"]',
        "a split unit of 3 pods must divide the job's 2 pods",
    ),
    (
        "TP across pods",
        "metadata/annotations",
        {"global.volcano.sh/communication": "{tensorParallel: 16}"},
        'metadata.annotations["global.volcano.sh/communication"].tensorParallel',
        "must divide the GPUs of one pod (8): tensor parallelism stays in a node",
    ),
    (
        "world size mismatch",
        "metadata/annotations",
        {"global.volcano.sh/communication": "{tensorParallel: 8, dataParallel: 4}"},
        'metadata.annotations["global.volcano.sh/communication"]',
        "TP x PP x CP x DP = 32 must equal the job's 16 GPUs",
    ),
    (
        "unknown plan field",
        "metadata/annotations",
        {"global.volcano.sh/communication": "{tensorParalel: 8}"},
        'metadata.annotations["global.volcano.sh/communication"].tensorParalel',
        "Extra inputs are not permitted",
    ),
]


@pytest.mark.parametrize(
    ("case", "path", "value", "field", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_documents_name_the_field(
    case: str, path: str, value: Any, field: str, message: str
) -> None:
    errors = errors_of(_set(job_document(), path, value))
    assert errors.get(field) == message, errors


def test_every_error_is_reported_at_once() -> None:
    doc = job_document()
    doc["spec"]["tasks"].append(copy.deepcopy(doc["spec"]["tasks"][0]))
    doc["spec"]["tasks"][1]["replicas"] = -2
    doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": "lots"}
    }
    errors = errors_of(doc)
    assert errors["spec.tasks[1].replicas"] == "must be >= 0"
    assert "spec.tasks[0].template.spec.containers[0].resources.requests.memory" in errors


@pytest.mark.parametrize(
    ("api_version", "kind", "field", "message"),
    [
        (
            "batch.volcano.sh/v1alpha1",
            "Deployment",
            "kind",
            "unsupported kind 'Deployment': expected Job (batch.volcano.sh/v1alpha1) or HyperJob (training.volcano.sh/v1alpha1)",
        ),
        (
            "batch/v1",
            "Job",
            "apiVersion",
            "must be batch.volcano.sh/v1alpha1 for kind Job, got 'batch/v1'",
        ),
        (
            "batch.volcano.sh/v1alpha1",
            "HyperJob",
            "apiVersion",
            "must be training.volcano.sh/v1alpha1 for kind HyperJob, got 'batch.volcano.sh/v1alpha1'",
        ),
    ],
)
def test_unknown_kinds_and_versions_are_refused(
    api_version: str, kind: str, field: str, message: str
) -> None:
    doc = job_document()
    doc["apiVersion"], doc["kind"] = api_version, kind
    assert errors_of(doc) == {field: message}


def test_hyperjob_errors_point_into_the_replicated_job() -> None:
    doc = example("hyperjob-llm-training.yaml")
    doc["spec"]["minAvailable"] = 3
    doc["spec"]["replicatedJobs"][0]["templateSpec"]["tasks"][0]["replicas"] = -1
    doc["spec"]["replicatedJobs"].append(
        {"name": "trainer", "templateSpec": yaml.safe_load("tasks: []")}
    )
    errors = errors_of(doc)
    assert errors["spec.replicatedJobs[0].templateSpec.tasks[0].replicas"] == "must be >= 0"
    assert errors["spec.replicatedJobs[1].name"] == "duplicate replicated job name 'trainer'"
    assert errors["spec.replicatedJobs[1].templateSpec.tasks"] == "must not be empty"


def test_hyperjob_children_must_agree_on_the_queue() -> None:
    doc = example("hyperjob-heterogeneous.yaml")
    doc["spec"]["replicatedJobs"][0]["templateSpec"]["queue"] = "a"
    doc["spec"]["replicatedJobs"][1]["templateSpec"]["queue"] = "b"
    errors = errors_of(doc)
    assert (
        errors["spec.replicatedJobs[1].templateSpec.queue"]
        == "all replicated jobs must use the same queue, got ['a', 'b']"
    )


def test_too_many_pods_are_refused() -> None:
    errors = errors_of(job_document(replicas=200_000))
    assert errors["spec.tasks"] == "asks for 200000 pods; at most 100000"


@pytest.mark.parametrize("name", ["llama3.1-pretrain", "a.b.c", "x" * 63])
def test_a_job_name_is_a_dns_subdomain_of_at_most_63_characters(name: str) -> None:
    assert normalize_job(job_document(name), OPTIONS).name == name


@pytest.mark.parametrize("name", ["a..b", "a.-b", ".a", "a.", "Llama3.1", "x" * 64, "a_b"])
def test_a_name_kubernetes_or_volcano_refuses_is_refused(name: str) -> None:
    with pytest.raises(Invalid) as refused:
        normalize_job(job_document(name), OPTIONS)
    assert refused.value.errors[0].field == "metadata.name"


@pytest.mark.parametrize(
    ("job_min", "task_mins", "expected"),
    [
        (None, (None, None), 6),  # every pod
        (None, (1, None), 4),  # Volcano: the sum of the tasks' minAvailable (replicas if unset)
        (0, (1, 2), 3),  # 0 is unset to Volcano's webhook (an int32, not a pointer)
        (2, (1, 2), 2),
    ],
)
def test_the_gang_s_minimum_defaults_as_volcano_s_webhook_sets_it(
    job_min: int | None, task_mins: tuple[int | None, int | None], expected: int
) -> None:
    doc = job_document("gang", replicas=3)
    doc["spec"]["tasks"].append(copy.deepcopy(doc["spec"]["tasks"][0]) | {"name": "other"})
    for task, minimum in zip(doc["spec"]["tasks"], task_mins, strict=True):
        if minimum is not None:
            task["minAvailable"] = minimum
    if job_min is not None:
        doc["spec"]["minAvailable"] = job_min
    assert normalize_job(doc, OPTIONS).gang.min_available == expected


def test_a_hyperjob_minimum_of_0_means_every_child_as_volcano_defaults_it() -> None:
    doc = example("hyperjob-llm-training.yaml")
    doc["spec"]["minAvailable"] = 0
    assert normalize_job(doc, OPTIONS).gang.min_sub_jobs == 2  # its two children
    doc["spec"]["minAvailable"] = -1
    with pytest.raises(Invalid) as refused:
        normalize_job(doc, OPTIONS)
    assert refused.value.errors[0].field == "spec.minAvailable"
