"""Shares run as Volcano Jobs in member clusters, through the real kubernetes-asyncio client
against the API emulator, the real gRPC stream and the real database. The test plays Volcano's
job controller: it moves the Volcano Jobs' status the way Volcano would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from core_agent.kubernetes.adapter import Kind, KubeApi, Missing, api_client
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import Federation, federation
from tests.core_agent.kube_objects import populate
from tests.factories import eventually, job_document, share_assignment, split_annotations
from tests.k8s_emulator.server import (
    NAMESPACES,
    SERVICE_EXPORTS,
    SERVICES,
    VOLCANO_JOBS,
    VOLCANO_QUEUES,
    KubeEmulator,
)


@asynccontextmanager
async def member_cluster(
    *, mcs: bool = True, queues: bool = False
) -> AsyncIterator[tuple[KubeEmulator, KubeApi]]:
    """An emulated member cluster: 6 nodes of 8 GPUs under two ToRs (38 GPUs free), the
    Volcano Job CRD, namespace `ml`, (unless `mcs` is False) the Multi-Cluster Services
    ServiceExport CRD, and (if `queues`) Volcano's Queue CRD."""
    emulator = KubeEmulator()
    host = await emulator.start()
    populate(emulator)
    emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    if mcs:
        emulator.register(SERVICE_EXPORTS, "ServiceExport", namespaced=True)
    if queues:
        emulator.register(VOLCANO_QUEUES, "Queue", namespaced=False)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    client = await api_client(host=host)
    try:
        yield emulator, KubeApi(client)
    finally:
        await client.close()
        await emulator.stop()


@asynccontextmanager
async def two_members(
    database_url: str, *, mcs: bool = True
) -> AsyncIterator[tuple[Federation, KubeEmulator, KubeEmulator]]:
    """A federation with two emulated member clusters, east and west (`member_cluster`),
    linked at 400 Gbps, both Ready."""
    async with (
        member_cluster(mcs=mcs) as (east, east_api),
        member_cluster(mcs=mcs) as (west, west_api),
        federation(database_url) as fed,
    ):
        await fed.join("east", KubernetesSource(east_api, watch_timeout_s=5))
        await fed.join("west", KubernetesSource(west_api, watch_timeout_s=5))
        await fed.link("east", "west")
        await fed.ready("east", "west")
        yield fed, east, west


def volcano_jobs(emulator: KubeEmulator) -> list[dict[str, Any]]:
    return list(emulator.objects[VOLCANO_JOBS].values())


def env_of(vcjob: dict[str, Any]) -> dict[str, str]:
    container = vcjob["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


def set_phase(emulator: KubeEmulator, vcjob: dict[str, Any], phase: str, **counts: int) -> None:
    """What Volcano's job controller would write."""
    meta = vcjob["metadata"]
    status = {"state": {"phase": phase}, "minAvailable": vcjob["spec"]["minAvailable"], **counts}
    emulator.patch(VOLCANO_JOBS, meta["name"], {"status": status}, namespace=meta["namespace"])


async def test_a_share_runs_as_a_volcano_job_and_reports_its_status(database_url: str) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        doc = job_document("train", replicas=2, networkTopology={"mode": "hard"})
        doc["spec"]["tasks"][0]["partitionPolicy"] = {"totalPartitions": 2, "partitionSize": 1}
        uid = await fed.submit(doc)

        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        job = await fed.reach(uid, "Dispatched")
        vcjob = volcano_jobs(emulator)[0]
        member = vcjob["metadata"]["name"]
        assert member.startswith("train-")
        assert vcjob["metadata"]["namespace"] == "ml"
        assert vcjob["metadata"]["labels"]["global.volcano.sh/job-uid"] == uid
        assert vcjob["spec"]["minAvailable"] == 2
        assert vcjob["spec"]["networkTopology"] == {"mode": "hard"}
        assert vcjob["spec"]["tasks"][0]["partitionPolicy"]["totalPartitions"] == 2
        env = env_of(vcjob)
        assert env["VGLOBAL_WORLD_PODS"] == "2"
        assert env["VGLOBAL_RANK_OFFSET"] == "0"
        assert env["VGLOBAL_CLUSTER_COUNT"] == "1"
        assert env["VGLOBAL_RENDEZVOUS_ADDR"] == f"{member}-worker-0.{member}.ml.svc:29500"
        labels = vcjob["metadata"]["labels"]
        assert labels["global.volcano.sh/placement"] == job["placement"]["uid"]

        set_phase(emulator, vcjob, "Running", running=2)
        await fed.reach(uid, "Running")
        set_phase(emulator, vcjob, "Completed", succeeded=2)
        await fed.reach(uid, "Succeeded")


async def test_a_split_job_becomes_one_volcano_job_per_cluster_and_cancel_deletes_both(
    database_url: str,
) -> None:
    async with two_members(database_url) as (fed, east, west):
        doc = job_document("llm", replicas=8)  # 64 GPUs; each cluster has room for 4 pods
        doc["metadata"]["annotations"] = {
            **split_annotations(2),
            "global.volcano.sh/crossing-gbps": "50",
        }
        uid = await fed.submit(doc)

        await eventually(lambda: len(volcano_jobs(east)) == 1 and len(volcano_jobs(west)) == 1)
        await fed.reach(uid, "Dispatched")
        shares = {e: volcano_jobs(c)[0] for e, c in (("east", east), ("west", west))}
        envs = {name: env_of(v) for name, v in shares.items()}
        assert sorted(int(e["VGLOBAL_RANK_OFFSET"]) for e in envs.values()) == [0, 4]
        assert sorted(e["VGLOBAL_CLUSTER_INDEX"] for e in envs.values()) == ["0", "1"]
        assert all(v["spec"]["minAvailable"] == 4 for v in shares.values())
        addresses = {e["VGLOBAL_RENDEZVOUS_ADDR"] for e in envs.values()}
        assert len(addresses) == 1
        assert addresses.pop().endswith(".ml.svc.clusterset.local:29500")
        # The rank-0 cluster exports rank 0's endpoint through Multi-Cluster Services.
        emulators = {"east": east, "west": west}
        first = next(n for n, e in envs.items() if e["VGLOBAL_CLUSTER_INDEX"] == "0")
        other = "west" if first == "east" else "east"
        member = shares[first]["metadata"]["name"]
        await eventually(lambda: len(emulators[first].objects[SERVICE_EXPORTS]) == 1)
        (service,) = emulators[first].objects[SERVICES].values()
        assert service["metadata"]["name"] == f"{member}-rdzv"
        assert service["spec"]["selector"] == {
            "volcano.sh/job-name": member,
            "volcano.sh/task-spec": "worker",
            "volcano.sh/task-index": "0",
        }
        assert service["metadata"]["ownerReferences"][0]["uid"] == shares[first]["metadata"]["uid"]
        assert envs[first]["VGLOBAL_RENDEZVOUS_ADDR"].startswith(f"{member}-rdzv.ml.svc")
        assert not emulators[other].objects[SERVICES]  # only the rank-0 cluster exports

        set_phase(east, shares["east"], "Running", running=4)
        job: dict[str, Any] = {}

        async def east_reported_running() -> bool:
            nonlocal job
            job = await fed.job(uid)
            phases = {s["cluster"]: s["phase"] for s in job["placement"]["shares"]}
            return phases["east"] == "Running"

        await eventually(east_reported_running)  # the report is applied ...
        assert job["state"] == "Dispatched"  # ... and one share running is not enough
        set_phase(west, shares["west"], "Running", running=4)
        await fed.reach(uid, "Running")

        assert (await fed.api.post(f"/api/v1/jobs/{uid}/cancel")).status_code == 200
        await eventually(lambda: not volcano_jobs(east) and not volcano_jobs(west))
        assert (await fed.job(uid))["state"] == "Cancelled"


class _CrashAfterCreate(KubeApi):
    """The agent dies right after creating the Volcano Job, before it can report (and before
    its watch of Volcano Jobs could see it)."""

    async def list_page(self, kind: Kind, *, limit: int, token: str | None) -> dict[str, Any]:
        if kind.name == "vcjobs":
            raise Missing("not watched by this agent")
        return await super().list_page(kind, limit=limit, token=token)

    async def create_volcano_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        created = await super().create_volcano_job(namespace, body)
        await asyncio.Event().wait()  # never reports; cancelled when the agent stops
        return created


async def test_an_agent_restarted_during_dispatch_creates_no_duplicate(database_url: str) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        crashing = _CrashAfterCreate(kube_api.core.api_client)
        await fed.join("k8s", KubernetesSource(crashing, watch_timeout_s=5))
        await fed.ready("k8s")
        uid = await fed.submit(job_document("train", replicas=2))
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        await fed.leave("k8s")
        assert (await fed.job(uid))["state"] == "Placed"  # the Global never heard back

        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.reach(uid, "Dispatched")  # the assignment was delivered again and applied
        assert len(volcano_jobs(emulator)) == 1  # ... onto the Volcano Job already there
        set_phase(emulator, volcano_jobs(emulator)[0], "Running", running=2)
        await fed.reach(uid, "Running")


async def test_a_share_the_cluster_refuses_withdraws_the_job(database_url: str) -> None:
    # The Global lets queues use namespace `absent`, which the member cluster does not have.
    allowed = {"default_namespaces": ["{queue}", "absent"]}
    async with (
        member_cluster() as (emulator, kube_api),
        federation(database_url, tenancy=allowed) as fed,
    ):
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        doc = job_document("train", replicas=2)
        doc["metadata"]["namespace"] = "absent"  # no such namespace in the member cluster
        uid = await fed.submit(doc)

        message = await fed.event(uid, "GangWithdrawn")
        assert "k8s: Failed" in message
        assert 'namespaces "absent" not found' in message
        assert not volcano_jobs(emulator)


async def test_without_multi_cluster_services_the_user_is_told(database_url: str) -> None:
    async with two_members(database_url, mcs=False) as (fed, _, _):
        doc = job_document("llm", replicas=8)
        doc["metadata"]["annotations"] = split_annotations(2)
        uid = await fed.submit(doc)

        message = await fed.event(uid, "ClusterWarning")
        assert "Multi-Cluster Services API" in message
        assert "not installed" in message
        assert (await fed.job(uid))["state"] == "Dispatched"  # the share still runs


async def test_the_agent_creates_no_job_in_kube_or_its_own_namespace() -> None:
    """Defence in depth (issue 38): whatever the Global sends, a share in kube-* or the
    agent's own namespace fails with the reason, and no Volcano Job is created there."""
    async with member_cluster() as (emulator, kube_api):
        emulator.create(NAMESPACES, {"metadata": {"name": "volcano-global-agent"}})
        source = KubernetesSource(kube_api, watch_timeout_s=5)
        source.shares.own_namespace = "volcano-global-agent"
        reports: list[Any] = []
        for index, namespace in enumerate(("kube-system", "volcano-global-agent")):
            document = job_document("root")
            document["metadata"]["namespace"] = namespace
            source.apply_share(
                share_assignment(
                    placement_id=f"0123abcd-0000-0000-0000-00000000000{index}",
                    namespace=namespace,
                    manifest_json=json.dumps(document),
                ),
                reports.append,
            )
        await eventually(lambda: len(reports) == 2)
        assert sorted((r.phase, r.message) for r in reports) == [
            ("Failed", "the agent creates no job in its own namespace 'volcano-global-agent'"),
            ("Failed", "the agent creates no job in the system namespace 'kube-system' (kube-*)"),
        ]
        assert volcano_jobs(emulator) == []
        await source.stop()
