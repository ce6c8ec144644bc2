"""Entry point of the parser: check a document's kind and metadata, read its spec, and derive
the gang, the split policy, the communication declaration and the lifecycle."""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from volcano_global.bounds import DURATION_S
from volcano_global.jobspec import elastic
from volcano_global.jobspec import extensions as ext
from volcano_global.jobspec.fields import Checker, child, is_job_name
from volcano_global.jobspec.gpu_models import canonical_or_none
from volcano_global.jobspec.hyperjob import HyperJobSummary, common_gpu_model, read_hyperjob
from volcano_global.jobspec.lifecycle import read_lifecycle
from volcano_global.jobspec.model import (
    Communication,
    Gang,
    NormalizedJob,
    SplitPolicy,
    TaskGang,
)
from volcano_global.jobspec.priority_classes import PriorityClass, resolve_priority
from volcano_global.jobspec.ranks import child_ranked_pods, gang_ranked_tasks, ranked_pods
from volcano_global.jobspec.volcano_job import JobSpecSummary, read_job_spec

VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
HYPERJOB = ("training.volcano.sh/v1alpha1", "HyperJob")


@dataclass(frozen=True)
class ParseOptions:
    # name -> class (the stored PriorityClasses), or a bare value (PreemptLowerPriority)
    priority_classes: Mapping[str, int | PriorityClass] = field(default_factory=dict)
    default_priority_class: str | None = None  # the globalDefault class, for a job naming none
    default_max_clusters: int = 4
    max_total_pods: int = 100_000


def normalize_job(doc: dict[str, Any], options: ParseOptions) -> NormalizedJob:
    """Validate a Volcano Job or HyperJob and normalize it. Raises `Invalid` listing every bad
    field."""
    check = Checker()
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    _check_kind(api_version, kind, check)
    metadata = _read_metadata(doc, check)
    spec = check.mapping(doc, "spec", "", required=True)
    check.raise_if_any()
    assert spec is not None and metadata.name is not None

    read = _read_spec(kind, spec, check, gpu_model=metadata.gpu_model, options=options)
    check.raise_if_any()
    lifecycle = read_lifecycle(
        kind, spec, max_retry=read.max_retry, start_timeout_s=metadata.start_timeout
    )
    annotations, gang = metadata.annotations, read.gang
    communication = ext.read_communication(
        annotations, check, world_size=gang.total_gpus, gpus_per_pod=_gpus_per_pod(gang.tasks)
    )
    split = _split(kind, read, communication, annotations, check, options)
    resolved = resolve_priority(
        read.priority_class, options.priority_classes, options.default_priority_class
    )
    if resolved is None:
        known = ", ".join(sorted(options.priority_classes)) or "none configured"
        check.fail(
            read.class_path, f"unknown priority class {read.priority_class!r} (known: {known})"
        )
    check.raise_if_any()
    assert resolved is not None
    return NormalizedJob(
        api_version=str(api_version),
        kind=kind,  # type: ignore[arg-type]
        name=metadata.name,
        namespace=metadata.namespace,
        queue=read.queue,
        priority_class_name=resolved.class_name,
        priority=resolved.value,
        preemption_policy=resolved.preemption_policy,
        gang=gang,
        split_policy=split,
        communication=communication,
        lifecycle=lifecycle,
        preemptable=annotations.get(ext.PREEMPTABLE) != "false",
    )


def _check_kind(api_version: Any, kind: Any, check: Checker) -> None:
    """A Volcano Job or HyperJob at its own apiVersion, or `Invalid` naming the field."""
    if (api_version, kind) in (VOLCANO_JOB, HYPERJOB):
        return
    if kind not in ("Job", "HyperJob"):
        check.fail(
            "kind",
            f"unsupported kind {kind!r}: expected Job "
            f"({VOLCANO_JOB[0]}) or HyperJob ({HYPERJOB[0]})",
        )
    else:
        expected = VOLCANO_JOB[0] if kind == "Job" else HYPERJOB[0]
        check.fail("apiVersion", f"must be {expected} for kind {kind}, got {api_version!r}")
    check.raise_if_any()


@dataclass(frozen=True)
class _Metadata:
    """What the parser reads from metadata: the identity and the annotations, with the two
    annotations the spec's reading needs."""

    name: str | None
    namespace: str
    annotations: dict[str, str]
    gpu_model: str | None
    start_timeout: int | None


def _read_metadata(doc: dict[str, Any], check: Checker) -> _Metadata:
    metadata = check.mapping(doc, "metadata", "", required=True) or {}
    name = _name(metadata, check)
    namespace = check.dns_label(metadata, "namespace", "metadata") or "default"
    labels = check.mapping(metadata, "labels", "metadata") or {}
    for key, value in labels.items():
        if not isinstance(value, str):
            check.fail(child("metadata.labels", str(key)), "must be a string")
    annotations = ext.read_annotations(metadata, check)
    gpu_model = canonical_or_none(annotations.get(ext.GPU_MODEL))
    start_timeout = ext.annotation_int(
        annotations, ext.GANG_START_TIMEOUT, check, minimum=1, maximum=DURATION_S.high
    )
    return _Metadata(name, namespace, annotations, gpu_model, start_timeout)


@dataclass(frozen=True)
class _Spec:
    """What the parser reads from a Job's or a HyperJob's spec."""

    gang: Gang
    queue: str | None
    priority_class: str | None
    class_path: str  # where the priority class was named, for its error
    max_retry: int | None  # a Job's; a HyperJob's child jobs carry their own
    hyper: HyperJobSummary | None
    plugins: frozenset[str] = frozenset()  # a Job's Volcano plugins


def _read_spec(
    kind: str, spec: dict[str, Any], check: Checker, *, gpu_model: str | None, options: ParseOptions
) -> _Spec:
    if kind == "Job":
        summary = read_job_spec(
            spec, "spec", check, default_gpu_model=gpu_model, max_total_pods=options.max_total_pods
        )
        return _Spec(
            gang=_job_gang(summary),
            queue=summary.queue,
            priority_class=summary.priority_class_name,
            class_path="spec.priorityClassName",
            max_retry=summary.max_retry,
            hyper=None,
            plugins=summary.plugins,
        )
    hyper = read_hyperjob(spec, check, gpu_model=gpu_model, max_total_pods=options.max_total_pods)
    return _Spec(
        gang=hyper.gang,
        queue=hyper.queue,
        priority_class=hyper.priority_class_name,
        class_path=hyper.class_path,
        max_retry=None,
        hyper=hyper,
    )


def _split(
    kind: str,
    read: _Spec,
    communication: Communication | None,
    annotations: dict[str, str],
    check: Checker,
    options: ParseOptions,
) -> SplitPolicy:
    """The split policy with what annotations add to it: the crossing rate and the elastic
    width."""
    split = _split_policy(kind, read.gang, communication, annotations, check, options, read.hyper)
    split = _whole_if_wired(split, read, annotations, check)
    crossing = ext.annotation_gbps(annotations, check)
    if crossing is not None:
        split = split.model_copy(update={"crossing_gbps": crossing})
    declared = ext.annotation_flag(annotations, ext.ELASTIC, check)
    if not check.errors:
        split = _with_width(read.gang, split, communication, declared, check)
    return split


# Volcano's job plugins that wire a job's pods together inside its one Volcano Job: each
# cluster's member Job would get its own keys, host list and master check, so a launcher would
# reach only its own cluster's pods (and the mpi plugin's webhook refuses a member Job without
# its master task).
WIRED_PLUGINS = ("mpi", "ssh")


def _whole_if_wired(
    split: SplitPolicy, read: _Spec, annotations: dict[str, str], check: Checker
) -> SplitPolicy:
    """A job wired by the mpi or ssh plugin runs whole in one cluster: asked to split, it is
    refused naming the annotation; split by its communication plan, it is not split."""
    wired = sorted(p for p in WIRED_PLUGINS if p in read.plugins)
    if not wired or split.mode != "auto":
        return split
    if annotations.get(ext.SPLIT) == "auto":
        check.fail(
            child(ext.ANNOTATIONS_PATH, ext.SPLIT),
            f"a job wired by Volcano's {' and '.join(wired)} plugin cannot be split over "
            "clusters: each cluster's member job would be wired alone (its own keys and "
            "hosts), and the launcher would reach only its own cluster's pods",
        )
    return SplitPolicy(mode="never", unit_pods=ranked_pods(read.gang), source="plugins")


def _name(metadata: dict[str, Any], check: Checker) -> str | None:
    name = check.string(metadata, "name", "metadata")
    if name is None:
        prefix = check.string(metadata, "generateName", "metadata")
        if prefix is None:
            check.fail("metadata.name", "required (or metadata.generateName)")
            return None
        suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        name = prefix[:58] + suffix
        field_name = "metadata.generateName"
    else:
        field_name = "metadata.name"
    if not is_job_name(name):
        check.fail(
            field_name,
            f"{name!r} is not a valid name: at most 63 lowercase letters, digits, '-' or '.', "
            "each part between dots starting and ending with a letter or digit",
        )
        return None
    return name


def _job_gang(summary: JobSpecSummary) -> Gang:
    return Gang(
        tasks=summary.tasks,
        min_available=summary.min_available,
        total_pods=summary.total_pods,
        total_gpus=sum(t.replicas * t.resources.gpus for t in summary.tasks),
        gpu_model=common_gpu_model(summary.tasks),
        network_topology=summary.network_topology,
    )


@dataclass(frozen=True)
class _SplitAsked:
    """What a job's split annotations ask (None: not said)."""

    mode: str | None  # auto, never
    max_clusters: int | None
    min_share: int | None
    unit_pods: int | None


def _split_policy(
    kind: str,
    gang: Gang,
    communication: Communication | None,
    annotations: dict[str, str],
    check: Checker,
    options: ParseOptions,
    hyper: HyperJobSummary | None = None,
) -> SplitPolicy:
    mode = annotations.get(ext.SPLIT)
    if mode not in (None, "auto", "never"):
        check.fail(child(ext.ANNOTATIONS_PATH, ext.SPLIT), "must be auto or never")
        mode = None
    asked = _SplitAsked(
        mode=mode,
        max_clusters=ext.annotation_int(annotations, ext.MAX_CLUSTERS, check, minimum=1),
        min_share=ext.annotation_int(annotations, ext.MIN_SHARE_PODS, check, minimum=0),
        unit_pods=ext.annotation_int(annotations, ext.UNIT_PODS, check, minimum=1),
    )
    if hyper is not None:
        return _hyperjob_split(gang, hyper, asked, check, options)
    return _job_split(gang, communication, asked, check, options)


def _hyperjob_split(
    gang: Gang, hyper: HyperJobSummary, asked: _SplitAsked, check: Checker, options: ParseOptions
) -> SplitPolicy:
    """A HyperJob's: its child jobs spread over clusters, or with splitPolicy auto the one
    replicated job's pool of pods split as a Job's."""
    mode, min_share = asked.mode, asked.min_share
    children = sum(s.replicas for s in gang.sub_jobs)
    never = mode == "never"
    widest = asked.max_clusters or hyper.max_domains
    if hyper.auto_split and not never:
        # splitPolicy auto: the placement splits the one replicated job's pool of pods.
        unit = asked.unit_pods or _smallest_whole_unit(gang)
        if ranked_pods(gang) % unit or _cut_partition(gang, unit) is not None:
            check.fail(
                child(ext.ANNOTATIONS_PATH, ext.UNIT_PODS),
                f"a split unit of {unit} pods must divide the pool's {ranked_pods(gang)} "
                "pods at whole partitions",
            )
        return SplitPolicy(
            mode="auto",
            unit_pods=unit,
            max_clusters=widest or options.default_max_clusters,
            min_share_pods=min_share if min_share is not None else unit,
            source="annotations" if mode else "hyperjob",
        )
    return SplitPolicy(
        mode="never" if never else "auto",
        unit="subJob",
        unit_pods=max((child_ranked_pods(gang, s) for s in gang.sub_jobs), default=1),
        max_clusters=1 if never else (widest or children),
        min_share_pods=min_share or 0,
        source="annotations" if mode else "hyperjob",
    )


def _job_split(
    gang: Gang,
    communication: Communication | None,
    asked: _SplitAsked,
    check: Checker,
    options: ParseOptions,
) -> SplitPolicy:
    """A Volcano Job's: split in units of whole partitions, if its annotations or its
    communication plan allow it."""
    mode, max_clusters, min_share, unit_pods = (
        asked.mode,
        asked.max_clusters,
        asked.min_share,
        asked.unit_pods,
    )
    source = "annotations" if mode or unit_pods or max_clusters else "default"
    if mode is None:
        mode = "auto" if communication is not None else "never"
        source = "communication" if communication is not None else source
    if mode == "never":
        return SplitPolicy(mode="never", unit_pods=ranked_pods(gang), source=source)  # type: ignore[arg-type]

    if unit_pods is None and communication is not None:
        unit_pods = max(communication.unit_gpus // communication.gpus_per_pod, 1)
    if unit_pods is None:
        unit_pods = _smallest_whole_unit(gang)
    path = child(ext.ANNOTATIONS_PATH, ext.UNIT_PODS)
    if (pods := ranked_pods(gang)) % unit_pods:
        what = "GPU pods" if pods != gang.total_pods else "pods"
        check.fail(path, f"a split unit of {unit_pods} pods must divide the job's {pods} {what}")
    elif (cut := _cut_partition(gang, unit_pods)) is not None:
        check.fail(
            path,
            f"a split unit of {unit_pods} pods would cut task {cut.name!r}'s partitions "
            f"of {cut.partition.partition_size if cut.partition else 0} pods",
        )
    return SplitPolicy(
        mode="auto",
        unit_pods=unit_pods,
        max_clusters=max_clusters or options.default_max_clusters,
        min_share_pods=min_share if min_share is not None else unit_pods,
        source=source,  # type: ignore[arg-type]
    )


def _with_width(
    gang: Gang,
    split: SplitPolicy,
    communication: Communication | None,
    declared: bool | None,
    check: Checker,
) -> SplitPolicy:
    """The split policy with the job's elastic width (`elastic.py`), when the job declared
    one. A job that never splits is still elastic in whole replicas: its unit is then the
    plan's replica or the smallest that cuts no partition, instead of the whole job."""
    path = child(ext.ANNOTATIONS_PATH, ext.ELASTIC)
    planned = communication is not None and communication.min_data_parallel is not None
    if declared is False and planned:
        check.fail(path, '"false" contradicts minDataParallel in the communication plan')
        return split
    if not (declared or planned):  # most jobs: their unit below is not needed
        return split
    unit = split.unit_pods  # a HyperJob's: one child job, split or not
    if split.mode == "never" and not gang.sub_jobs:
        unit = _smallest_whole_unit(gang)
        if communication is not None:
            plan_unit = max(communication.unit_gpus // communication.gpus_per_pod, 1)
            if ranked_pods(gang) % plan_unit == 0 and _cut_partition(gang, plan_unit) is None:
                unit = plan_unit
    fewest = elastic.min_units(gang, unit_pods=unit, communication=communication)
    if not fewest:
        if declared:
            check.fail(path, elastic.NO_RANGE)
        return split
    return split.model_copy(update={"min_units": fewest, "unit_pods": unit})


def _cut_partition(gang: Gang, unit_pods: int) -> TaskGang | None:
    """The first task whose partitions a share boundary (a multiple of the unit in rank
    order) would cut. Volcano refuses a task whose replicas are not whole partitions
    (`replicas = totalPartitions x partitionSize`, totalPartitions >= 1), so every boundary
    inside a partitioned task must fall between two of its partitions, counted from the task's
    first rank - not only a unit divisible by the partition size (a task starting at an odd
    rank gave a share `totalPartitions: 0`). Only ranked tasks are cut (`ranks.py`)."""
    start = 0
    for task in gang_ranked_tasks(gang):
        end = start + task.replicas
        if task.partition:
            size = task.partition.partition_size
            first = (start // unit_pods + 1) * unit_pods
            if any((b - start) % size for b in range(first, end, unit_pods)):
                return task
        start = end
    return None


def _smallest_whole_unit(gang: Gang) -> int:
    """The default unit: the smallest divisor of the job's ranked pods that cuts no partition
    (1 for a job without partitions; the whole job when nothing smaller fits)."""
    total = max(ranked_pods(gang), 1)
    tasks = gang_ranked_tasks(gang)
    smallest = min((t.partition.partition_size for t in tasks if t.partition), default=1)
    for unit in range(smallest, total + 1):
        if total % unit == 0 and _cut_partition(gang, unit) is None:
            return unit
    return total


def _gpus_per_pod(tasks: list[TaskGang]) -> int | None:
    sizes = {t.resources.gpus for t in tasks if t.resources.gpus}
    return sizes.pop() if len(sizes) == 1 else None
