"""Staging end to end: a real Global (REST, gRPC, scheduling loop, database) and a Kubernetes
agent against the API emulator, whose job controller runs the staging Job. The first tests play
the round's decision (every share the round writes is given a staging item); the last lets the
round decide, from where the data is and how busy its cluster is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from sqlalchemy import event

from core_agent.kubernetes.source import KubernetesSource
from core_agent.kubernetes.staging import StagingConfig
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import federation
from tests.core_agent.test_kubernetes_shares import member_cluster, set_phase, volcano_jobs
from tests.data_documents import data_source, data_source_claim
from tests.factories import eventually, job_document
from tests.k8s_emulator.server import BATCH_JOBS
from volcano_global.db.models import ClusterShare
from volcano_global.rpc.shares import StagingItem

CORPUS = StagingItem(
    data_source="corpus-v3",
    bytes=2 * 2**40,
    source_cluster="gpu-west",
    source_uri="s3://corpora/v3/*",
    destination="/data/corpus-v3/",
    gbps=100.0,
)


@contextmanager
def every_share_stages(item: StagingItem) -> Iterator[None]:
    def staged(target: ClusterShare, args: Any, kwargs: dict[str, Any]) -> None:
        kwargs["staging"] = [item.to_payload()]

    event.listen(ClusterShare, "init", staged)
    try:
        yield
    finally:
        event.remove(ClusterShare, "init", staged)


async def test_a_job_stages_its_data_then_runs_in_the_member_cluster(database_url: str) -> None:
    async with (
        member_cluster() as (emulator, kube_api),
        federation(database_url) as fed,
    ):
        emulator.jobs.run_s = 3600.0  # until finish()
        source = KubernetesSource(kube_api, watch_timeout_s=5, staging=StagingConfig())
        await fed.join("k8s", source)
        await fed.ready("k8s")
        with every_share_stages(CORPUS):
            uid = await fed.submit(job_document("train", replicas=2))
            started = await fed.event(uid, "StagingStarted")
        assert started == "k8s: staging corpus-v3 (2 TiB) from gpu-west at 100 Gbps (about 3 min)"
        [staging_job] = emulator.objects[BATCH_JOBS].values()
        env = staging_job["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "VGLOBAL_STAGING_SOURCE", "value": "s3://corpora/v3/*"} in env
        job = await fed.job(uid)
        assert job["state"] == "Placed"
        assert [s["phase"] for s in job["placement"]["shares"]] == ["Staging"]
        assert volcano_jobs(emulator) == []

        emulator.jobs.finish()
        await fed.event(uid, "StagingEnded")
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        await fed.reach(uid, "Dispatched")
        [vcjob] = volcano_jobs(emulator)
        set_phase(emulator, vcjob, "Running", running=2)
        await fed.reach(uid, "Running")


async def test_a_failed_staging_requeues_the_job_and_its_staging_job_is_removed(
    database_url: str,
) -> None:
    async with (
        member_cluster() as (emulator, kube_api),
        federation(database_url) as fed,
    ):
        emulator.jobs.fail_reason = "BackoffLimitExceeded"
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        with every_share_stages(CORPUS):
            uid = await fed.submit(job_document("train", replicas=2))
            failed = await fed.event(uid, "StagingFailed")
            assert "BackoffLimitExceeded" in failed
            withdrawn = await fed.event(uid, "GangWithdrawn")
        assert "failed: BackoffLimitExceeded" in withdrawn
        # The withdrawn placement's cancellation removed its failed copy in the cluster (the
        # job, requeued, may be placed again meanwhile: a copy of another placement).
        name = failed.split("staging Job ml/", 1)[1].split(" ", 1)[0]
        await eventually(lambda: ("ml", name) not in emulator.objects[BATCH_JOBS])


async def test_the_round_stages_a_job_into_the_member_cluster_when_its_data_is_busy(
    database_url: str,
) -> None:
    """No test hook: the round itself sends the copy. The data is in a simulated cluster
    busy for an hour; the job goes to the Kubernetes member, whose staging Job copies it from
    the DataSource's `uri` to `/data/<name>/`, then its Volcano Job is created."""
    west = SimulatedCluster.from_spec(
        "west", ClusterSpec.model_validate({"nodeGroups": [{"count": 2, "gpusPerNode": 8}]})
    )
    async with (
        member_cluster() as (emulator, kube_api),
        federation(database_url) as fed,
    ):
        emulator.jobs.run_s = 3600.0  # until finish()
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.join("west", west)
        await fed.link("k8s", "west")
        await fed.ready("k8s", "west")
        source = data_source("corpus-v3", clusters=("west",), size="2Ti")
        source["spec"]["attributes"]["uri"] = "s3://corpora/v3/*"
        claims = [data_source_claim(f"{n}-corpus", workload=n) for n in ("hog", "train")]
        response = await fed.api.post(
            "/api/v1/apply",
            content=yaml.safe_dump_all([source, *claims]),
            headers={"Content-Type": "application/yaml"},
        )
        assert response.status_code == 200, response.text
        hog = await fed.submit(job_document("hog", replicas=2, runningEstimate="1h"))
        await fed.reach(hog, "Running")
        uid = await fed.submit(job_document("train", replicas=2, runningEstimate="1h"))

        started = await fed.event(uid, "StagingStarted")
        assert started.startswith("k8s: staging corpus-v3 (2 TiB) from west at 100 Gbps")
        [staging_job] = emulator.objects[BATCH_JOBS].values()
        env = staging_job["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "VGLOBAL_STAGING_SOURCE", "value": "s3://corpora/v3/*"} in env
        assert {"name": "VGLOBAL_STAGING_DESTINATION", "value": "/data/corpus-v3/"} in env
        assert volcano_jobs(emulator) == []

        emulator.jobs.finish()
        await fed.event(uid, "StagingEnded")
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        job = await fed.reach(uid, "Dispatched")
        assert [s["cluster"] for s in job["placement"]["shares"]] == ["k8s"]
        assert job["placement"]["linkReservations"] == []
        shown = (await fed.api.get("/api/v1/datasources/corpus-v3")).json()
        assert shown["clusters"] == ["west", "k8s"]
