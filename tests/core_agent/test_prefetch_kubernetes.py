"""Copies that belong to no share in a Kubernetes member cluster, through the real
kubernetes-asyncio client against the API emulator, whose job controller runs the staging
Job: created with the copier and the item as environment, labelled with the copy, watched,
reported Copying and then Succeeded (or Failed with the reason); given again (a new stream,
an agent restart) nothing is copied twice; a stop deletes the Job. End to end with a real
Global: a waiting job's data is prefetched into the emulated cluster and its locality grows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from core_agent.kubernetes.source import KubernetesSource
from core_agent.kubernetes.staging import STAGED_BYTES_ANNOTATION, STAGING_LABEL, StagingConfig
from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.data_federation import SPEC, corpus_in_west, reader
from tests.core_agent.federation import federation
from tests.core_agent.kube_objects import pod
from tests.core_agent.test_kubernetes_shares import member_cluster, set_phase, volcano_jobs
from tests.core_agent.test_kubernetes_staging import CONFIG, CORPUS, agent, staging_jobs
from tests.factories import eventually
from tests.k8s_emulator.server import BATCH_JOBS, PODS
from volcano_global.jobspec.members import PLACEMENT_LABEL
from volcano_global.rpc.copies import (
    MAX_BYTES,
    CopyCause,
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
    DataCopyCancellation,
)

COPY = DataCopyAssignment(
    copy_id="0b9c6a4e-2f1d-4c3b-9a8e-7d6f5e4c3b2a",
    namespace="ml",
    name="train",
    job_uid="5d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
    item=CORPUS,
)


@asynccontextmanager
async def restarted(
    first: KubernetesSource, *, start: bool = True
) -> AsyncIterator[KubernetesSource]:
    """The agent restarted: a new source on the API server `first` used (`first` stopped by the
    caller), started unless `start` is False (its watch then has listed nothing), stopped after."""
    second = KubernetesSource(first.api, watch_timeout_s=5, staging=CONFIG)
    if start:
        await second.start()
    try:
        yield second
    finally:
        await second.stop()


def ends(reports: list[CopyStatus]) -> list[CopyPhase]:
    return [r.phase for r in reports if r.phase.ended]


async def test_a_copy_runs_as_a_staging_job_and_reports_its_end() -> None:
    async with agent() as (emulator, source, _):
        emulator.jobs.run_s = 1.0
        reports: list[CopyStatus] = []
        source.apply_copy(COPY, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)))
        [job] = staging_jobs(emulator)
        labels = job["metadata"]["labels"]
        assert (labels[PLACEMENT_LABEL], labels[STAGING_LABEL]) == (COPY.copy_id, "true")
        assert job["metadata"]["name"] == f"train-stage-{COPY.copy_id}"
        [copier] = job["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in copier["env"]}
        assert env["VGLOBAL_STAGING_SOURCE"] == "s3://corpora/v3/*"
        assert job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
            "claimName": CONFIG.volume_claim
        }
        await eventually(lambda: ends(reports) == [CopyPhase.SUCCEEDED])
        assert reports[0].phase is CopyPhase.COPYING

        source.apply_copy(COPY, reports.append)  # sent again: its end, again, no new Job
        await eventually(lambda: ends(reports) == [CopyPhase.SUCCEEDED] * 2)
        assert len(staging_jobs(emulator)) == 1
        assert source.held_shares() == []  # a copy is no share


async def test_a_restarted_agent_waits_for_the_copys_job_and_a_stop_deletes_it() -> None:
    async with agent() as (emulator, first, _):
        emulator.jobs.run_s = 60.0
        reports: list[CopyStatus] = []
        first.apply_copy(COPY, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        await first.stop()  # the agent restarts: the Job runs on
        async with restarted(first) as second:
            second.apply_copy(COPY, reports.append)
            await eventually(lambda: len(reports) >= 2)
            assert len(staging_jobs(emulator)) == 1  # found again by its name
            second.cancel_copy(
                DataCopyCancellation(copy_id=COPY.copy_id, reason="x"), reports.append
            )
            await eventually(lambda: ends(reports) == [CopyPhase.STOPPED])
            await eventually(lambda: staging_jobs(emulator) == [])


async def test_a_stop_after_the_copy_succeeded_reports_the_success_again() -> None:
    # The stop crossed the success on the wire: the data is there, and the Global is told so.
    async with agent() as (emulator, source, _):
        emulator.jobs.run_s = 0.5
        reports: list[CopyStatus] = []
        source.apply_copy(COPY, reports.append)
        await eventually(lambda: ends(reports) == [CopyPhase.SUCCEEDED])
        source.cancel_copy(DataCopyCancellation(copy_id=COPY.copy_id, reason="x"), reports.append)
        await eventually(lambda: len(ends(reports)) == 2)
        assert ends(reports) == [CopyPhase.SUCCEEDED] * 2
        await stop_after_restart(emulator, source, CopyPhase.SUCCEEDED)


async def stop_after_restart(emulator: Any, first: Any, phase: CopyPhase) -> None:
    """A restarted agent told to stop a copy whose Job ended meanwhile reports that end."""
    await first.stop()
    async with restarted(first) as second:
        reports: list[CopyStatus] = []
        second.cancel_copy(DataCopyCancellation(copy_id=COPY.copy_id, reason="x"), reports.append)
        await eventually(lambda: ends(reports) == [phase])
        assert len(staging_jobs(emulator)) == 1


async def test_a_stop_finds_the_copys_job_the_watch_has_not_seen() -> None:
    # An agent whose watch has not listed the Job yet (here: not started) still deletes it:
    # it lists the Jobs by the copy's label from the API server.
    async with agent() as (emulator, first, _):
        emulator.jobs.run_s = 60.0
        reports: list[CopyStatus] = []
        first.apply_copy(COPY, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        await first.stop()
        async with restarted(first, start=False) as second:
            second.cancel_copy(
                DataCopyCancellation(copy_id=COPY.copy_id, reason="x"), reports.append
            )
            await eventually(lambda: ends(reports) == [CopyPhase.STOPPED])
            assert staging_jobs(emulator) == []


async def test_a_failed_copy_is_reported_with_the_reason() -> None:
    async with agent(StagingConfig()) as (emulator, source, _):
        emulator.jobs.run_s, emulator.jobs.fail_reason = 0.5, "BackoffLimitExceeded"
        reports: list[CopyStatus] = []
        source.apply_copy(COPY, reports.append)
        await eventually(lambda: ends(reports) == [CopyPhase.FAILED])
        assert "BackoffLimitExceeded" in reports[-1].message


async def test_a_copy_into_a_system_namespace_fails_and_makes_no_job() -> None:
    async with agent() as (emulator, source, _):
        reports: list[CopyStatus] = []
        source.apply_copy(replace(COPY, namespace="kube-system"), reports.append)
        await eventually(lambda: ends(reports) == [CopyPhase.FAILED])
        assert "system namespace 'kube-system'" in reports[-1].message
        assert staging_jobs(emulator) == []


async def test_a_failed_copy_says_whether_it_blames_the_jobs_namespace_or_the_cluster() -> None:
    # The Global counts a cluster's failed copies by their cause (copy_backoff), not by their
    # words: the agent says it. Its own refusals (kube-*, its own namespace), the API
    # server's 404 on the namespace and RBAC's 403 on the Job blame the job's namespace; a
    # copier failing, or the Jobs' list refused (not in a namespace), the cluster.
    async with agent() as (emulator, source, _):
        reports: list[CopyStatus] = []
        own = source.shares.own_namespace
        expected = {
            "kube-system": CopyCause.NAMESPACE_REFUSED,
            own: CopyCause.NAMESPACE_REFUSED,
            "absent": CopyCause.NAMESPACE_MISSING,
            "ml": CopyCause.FORBIDDEN,
        }
        emulator.faults.add("POST", "/apis/batch/v1/namespaces/ml/jobs", 403, message=RBAC_DENIED)
        for i, (namespace, cause) in enumerate(expected.items()):
            copy = replace(COPY, copy_id=f"{i + 1}{COPY.copy_id[1:]}", namespace=namespace)
            source.apply_copy(copy, reports.append)
            await eventually(lambda: len(ends(reports)) == 1)
            [end] = [r for r in reports if r.phase.ended]
            assert (end.phase, end.cause) == (CopyPhase.FAILED, cause), end.message
            assert CopyStatus.from_proto(end.to_proto()).cause is cause
            reports.clear()
        assert staging_jobs(emulator) == []
        emulator.faults.add("GET", "/apis/batch/v1/jobs", 403, watch=False)
        source.apply_copy(replace(COPY, copy_id=f"8{COPY.copy_id[1:]}"), reports.append)
        await eventually(lambda: len(ends(reports)) == 1)
        assert (reports[-1].cause, "forbidden" in reports[-1].message) == (
            CopyCause.DESTINATION,
            True,
        )
        reports.clear()
        emulator.jobs.run_s, emulator.jobs.fail_reason = 0.5, "BackoffLimitExceeded"
        source.apply_copy(COPY, reports.append)  # the cluster's own failure counts
        await eventually(lambda: len(ends(reports)) == 1)
        assert (reports[-1].phase, reports[-1].cause) == (CopyPhase.FAILED, CopyCause.DESTINATION)


RBAC_DENIED = (
    'jobs.batch is forbidden: User "system:serviceaccount:volcano-global:vglobal-agent" cannot '
    'create resource "jobs" in API group "batch" in the namespace "ml"'
)
JOB = f'jobs.batch "train-stage-{COPY.copy_id}" is forbidden'
# kube-apiserver's other refusals of the staging Job, as it words them: its reason is
# `Forbidden` (or `NotFound`) for each, the message and details tell them apart.
REFUSALS = {
    "Gatekeeper's webhook": (
        403,
        'admission webhook "validation.gatekeeper.sh" denied the request: [no-batch-jobs] '
        "batch Jobs are not allowed in this cluster",
        None,
        CopyCause.DESTINATION,
    ),
    "a webhook quoting RBAC": (
        403,
        f'admission webhook "policy.example.com" denied the request: {RBAC_DENIED}',
        None,
        CopyCause.DESTINATION,
    ),
    "a ResourceQuota": (
        403,
        f"{JOB}: exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=50, "
        "limited: count/jobs.batch=50",
        None,
        CopyCause.DESTINATION,
    ),
    "a LimitRange": (
        403,
        f"{JOB}: maximum memory usage per Container is 1Gi, but limit is 4Gi",
        None,
        CopyCause.DESTINATION,
    ),
    "an admission policy": (
        403,
        f"{JOB}: ValidatingAdmissionPolicy 'no-jobs' with binding 'no-jobs' denied request: no",
        None,
        CopyCause.DESTINATION,
    ),
    "the namespace being deleted": (
        403,
        f"{JOB}: unable to create new content in namespace ml because it is being terminated",
        None,
        CopyCause.NAMESPACE_MISSING,
    ),
    "RBAC": (403, RBAC_DENIED, None, CopyCause.FORBIDDEN),
    "no such service account": (
        404,
        'serviceaccounts "copier" not found',
        {"name": "copier", "kind": "serviceaccounts"},
        CopyCause.DESTINATION,
    ),
    "no such namespace": (
        404,
        'namespaces "ml" not found',
        {"name": "ml", "kind": "namespaces"},
        CopyCause.NAMESPACE_MISSING,
    ),
}


@pytest.mark.parametrize("refusal", list(REFUSALS))
async def test_only_rbac_and_the_namespace_refusing_the_copys_job_blame_the_namespace(
    refusal: str,
) -> None:
    # Every 403 blamed the job's namespace: a cluster-wide policy refusing the copier (a
    # webhook, a quota) then never counted against the cluster. Only RBAC's words, and the
    # namespace missing or being deleted, do; and an old agent's words read the same.
    status, message, details, cause = REFUSALS[refusal]
    async with agent() as (emulator, source, _):
        path = "/apis/batch/v1/namespaces/ml/jobs"
        emulator.faults.add("POST", path, status, message=message, details=details)
        reports: list[CopyStatus] = []
        source.apply_copy(COPY, reports.append)
        await eventually(lambda: len(ends(reports)) == 1)
        assert (reports[-1].phase, reports[-1].cause) == (CopyPhase.FAILED, cause)
        assert message in reports[-1].message
        assert CopyCause.of_words(reports[-1].message) is cause
        assert staging_jobs(emulator) == []


def fill(emulator: Any) -> None:
    """Every GPU of the emulated cluster's six nodes in use (what its running job's pods do)."""
    emulator.create(PODS, pod("s1", "n1", 6))
    for i in range(2, 6):
        emulator.create(PODS, pod(f"s{i}", f"n{i}", 8))


async def test_a_waiting_jobs_data_is_prefetched_into_the_kubernetes_cluster(
    database_url: str,
) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        emulator.jobs.run_s = 1.0
        await fed.join("east", KubernetesSource(kube_api, watch_timeout_s=5, staging=CONFIG))
        west = SimulatedCluster.from_spec("west", SPEC)
        await fed.join("west", west)
        await corpus_in_west(fed)
        hog = await reader(fed, "hog", "1h")  # where the data is, for an hour
        await fed.reach(hog, "Running")
        short = await reader(fed, "short", "30m", reads=False, replicas=4)  # east
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        set_phase(emulator, volcano_jobs(emulator)[0], "Running", running=4)
        fill(emulator)
        await fed.reach(short, "Running")

        uid = await reader(fed, "train", "20s", replicas=4)
        await fed.event(uid, "PrefetchStarted")
        await eventually(lambda: bool(staging_jobs(emulator)))
        [job] = staging_jobs(emulator)
        assert job["metadata"]["labels"][STAGING_LABEL] == "true"
        assert job["metadata"]["name"].startswith("train-stage-")  # the job's name, as documented
        await fed.event(uid, "PrefetchEnded")
        source = (await fed.api.get("/api/v1/datasources/corpus")).json()
        assert source["clusters"] == ["west", "east"]
        assert (await fed.job(uid))["state"] == "Pending"
        assert len(volcano_jobs(emulator)) == 1  # the copy made no Volcano Job


async def test_a_restarted_agent_adopts_the_copys_job_when_its_name_changed() -> None:
    # The copy's job was deleted while it ran: the Global now sends it under its data source's
    # name. The restarted agent finds the running Job by the copy's label and makes no second.
    async with agent() as (emulator, first, _):
        emulator.jobs.run_s = 2.0
        reports: list[CopyStatus] = []
        first.apply_copy(COPY, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        await first.stop()
        async with restarted(first) as second:
            second.apply_copy(replace(COPY, name="corpus", job_uid=""), reports.append)
            await eventually(lambda: ends(reports) == [CopyPhase.SUCCEEDED])
            [job] = staging_jobs(emulator)
            assert job["metadata"]["name"] == f"train-stage-{COPY.copy_id}"


@pytest.mark.parametrize(
    ("annotation", "reported"), [(str(2**64), MAX_BYTES), ("9" * 5000, MAX_BYTES), ("²", 0)]
)
async def test_a_copiers_count_past_what_the_global_stores_is_reported_at_most(
    annotation: str, reported: int
) -> None:
    # 2**64 bytes made a report the Global refuses (its stream ended); "²" made the wait's
    # int() raise (the copy was never reported again). Then the copier counts on.
    async with agent() as (emulator, source, _):
        emulator.jobs.run_s = 60.0
        reports: list[CopyStatus] = []
        source.apply_copy(COPY, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        meta = staging_jobs(emulator)[0]["metadata"]
        for value in (annotation, "1024"):
            patch = {"metadata": {"annotations": {STAGED_BYTES_ANNOTATION: value}}}
            emulator.patch(BATCH_JOBS, meta["name"], patch, meta["namespace"])
            await eventually(lambda: any(r.staged_bytes == reported for r in reports))
        await eventually(lambda: reports[-1].staged_bytes == 1024)
        for r in reports:
            assert CopyStatus.from_proto(r.to_proto()).staged_bytes == r.staged_bytes


async def test_a_copy_whose_jobs_cannot_be_listed_fails_with_the_reason() -> None:
    # RBAC refusing the list by the copy's label escaped the copy's task: never reported, the
    # copy stayed Pending on the Global with its bandwidth held.
    async with agent() as (emulator, source, _):
        emulator.faults.add("GET", "/apis/batch/v1/jobs", 403, watch=False)
        reports: list[CopyStatus] = []
        source.apply_copy(COPY, reports.append)
        await eventually(lambda: ends(reports) == [CopyPhase.FAILED])
        assert "forbidden" in reports[-1].message
        assert staging_jobs(emulator) == []


async def test_of_two_jobs_of_one_copy_the_newest_is_adopted_and_the_other_deleted() -> None:
    # Two copiers for one copy (agents raced): one is waited for, the same whichever order
    # the API server lists them in (created last; of one second, named last), the other goes.
    # The newer is named to sort first (the emulator lists by name): adopting the last listed
    # would take the older.
    async with agent() as (emulator, first, _):
        emulator.jobs.run_s = 2.0
        reports: list[CopyStatus] = []
        first.apply_copy(COPY, reports.append)
        await eventually(lambda: bool(staging_jobs(emulator)) and bool(reports))
        await first.stop()
        [job] = staging_jobs(emulator)
        created = datetime.strptime(job["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
        later = (created + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        twin = {**job, "metadata": {**job["metadata"], "name": "aa-twin"}}
        for key in ("uid", "resourceVersion"):
            twin["metadata"].pop(key, None)
        twin["metadata"]["creationTimestamp"] = later
        emulator.create(BATCH_JOBS, twin)
        async with restarted(first) as second:
            second.apply_copy(COPY, reports.append)
            await eventually(lambda: len(staging_jobs(emulator)) == 1)
            assert staging_jobs(emulator)[0]["metadata"]["name"] == "aa-twin"  # created last
