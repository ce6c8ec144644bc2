"""The Volcano Queue a member job names is made to exist, and found Open, in the member cluster
before the job is created (core_agent/kubernetes/queues.py). Through the real kubernetes-asyncio
client over HTTP against the emulator, which serves Volcano Queues with their CRD's schema."""

from __future__ import annotations

import json
from typing import Any

from core_agent.kubernetes.adapter import KubeApi
from core_agent.kubernetes.retry import RetryPolicy
from core_agent.kubernetes.shares import MemberJobs
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import federation
from tests.core_agent.test_kubernetes_shares import member_cluster
from tests.factories import eventually, job_document, share_assignment
from tests.k8s_emulator.server import VOLCANO_JOBS, VOLCANO_QUEUES
from volcano_global.jobspec.queue_document import queue_document
from volcano_global.rpc.shares import SharePhase, ShareStatus

FAST = RetryPolicy(initial_s=0.05, cap_s=0.2, slow_after_s=60.0)
QUEUE_SPEC: dict[str, Any] = {
    "weight": 4,
    "capability": {"nvidia.com/gpu": 64, "cpu": "512"},
    "deserved": {"nvidia.com/gpu": 32},
    "guarantee": {"resource": {"nvidia.com/gpu": 16}},
    "reclaimable": False,
    "parent": "eng",
}


def assignment(queue: str = "llm", state: str = "Open") -> Any:
    document = queue_document(
        name=queue, spec=QUEUE_SPEC, labels={"team": "nlp"}, annotations={}, state=state
    )
    return share_assignment(
        manifest_json=json.dumps(job_document("train", queue=queue)),
        queue_json=json.dumps(document),
    )


async def run_share(api: KubeApi, share: Any) -> list[ShareStatus]:
    shares = MemberJobs(api, retry=FAST)
    reports: list[ShareStatus] = []
    shares.apply_share(share, reports.append)
    await eventually(lambda: bool(reports))
    await shares.stop()
    return reports


async def test_a_missing_queue_is_created_with_the_queues_spec_before_the_job() -> None:
    async with member_cluster(mcs=False, queues=True) as (emulator, api):
        reports = await run_share(api, assignment())
        assert [r.phase for r in reports] == [SharePhase.ACCEPTED]
        made = emulator.objects[VOLCANO_QUEUES][("", "llm")]
        # Fleet-wide fields (parent, guarantee, deserved) stay with the Global.
        assert made["spec"] == {
            "weight": 4,
            "capability": {"nvidia.com/gpu": 64, "cpu": "512"},
            "reclaimable": False,
        }
        assert made["metadata"]["labels"]["global.volcano.sh/managed-by"] == "volcano-global"
        assert made["metadata"]["labels"]["team"] == "nlp"
        assert emulator.requests.index("POST /apis/scheduling.volcano.sh/v1beta1/queues") < next(
            i for i, r in enumerate(emulator.requests) if r.startswith("POST /apis/batch")
        )
        (job,) = emulator.objects[VOLCANO_JOBS].values()
        assert job["spec"]["queue"] == "llm"


async def test_an_existing_open_queue_is_used_as_it_is() -> None:
    async with member_cluster(mcs=False, queues=True) as (emulator, api):
        emulator.create(
            VOLCANO_QUEUES,
            {"metadata": {"name": "llm"}, "spec": {"weight": 9}, "status": {"state": "Open"}},
        )
        reports = await run_share(api, assignment())
        assert [r.phase for r in reports] == [SharePhase.ACCEPTED]
        assert emulator.objects[VOLCANO_QUEUES][("", "llm")]["spec"] == {"weight": 9}
        assert len(emulator.objects[VOLCANO_JOBS]) == 1


async def test_a_queue_closed_in_the_cluster_fails_the_share_clearly() -> None:
    async with member_cluster(mcs=False, queues=True) as (emulator, api):
        emulator.create(
            VOLCANO_QUEUES,
            {"metadata": {"name": "llm"}, "spec": {"weight": 1}, "status": {"state": "Closed"}},
        )
        reports = await run_share(api, assignment())
        assert [r.phase for r in reports] == [SharePhase.FAILED]
        assert reports[0].message.startswith("Volcano Queue llm is Closed in this cluster")
        assert not emulator.objects[VOLCANO_JOBS]


async def test_rbac_forbidding_the_queue_fails_the_share_with_the_servers_words() -> None:
    async with member_cluster(mcs=False, queues=True) as (emulator, api):
        emulator.faults.add("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", 403)
        reports = await run_share(api, assignment())
        assert [r.phase for r in reports] == [SharePhase.FAILED]
        assert reports[0].message.startswith("cannot create Volcano Queue llm in this cluster: ")
        assert 'cannot create resource "queues"' in reports[0].message
        assert not emulator.objects[VOLCANO_JOBS]


async def test_without_the_queue_crd_the_share_runs_as_before() -> None:
    async with member_cluster(mcs=False, queues=True) as (emulator, api):
        del emulator.types[VOLCANO_QUEUES]  # a cluster serving Volcano Jobs but not Queues
        reports = await run_share(api, assignment())
        assert [r.phase for r in reports] == [SharePhase.ACCEPTED]
        assert len(emulator.objects[VOLCANO_JOBS]) == 1


async def test_a_job_of_a_global_queue_makes_that_queue_in_its_member_cluster(
    database_url: str,
) -> None:
    """End to end: a Volcano Queue applied to the Global, a job submitted to it, placed in an
    emulated member cluster whose agent creates the queue there before the Volcano Job."""
    async with (
        member_cluster(mcs=False, queues=True) as (emulator, api),
        federation(database_url) as fed,
    ):
        await fed.join("k8s", KubernetesSource(api, watch_timeout_s=5))
        await fed.ready("k8s")
        document = queue_document(
            name="llm",
            spec={"weight": 3, "parent": "eng"},
            labels={},
            annotations={},
            state="Open",
        )
        eng = {**document, "metadata": {"name": "eng"}, "spec": {"weight": 1}}
        del eng["status"], document["status"]
        assert (await fed.api.post("/api/v1/queues", json=eng)).status_code == 201
        assert (await fed.api.post("/api/v1/queues", json=document)).status_code == 201
        uid = await fed.submit(job_document("train", queue="llm", replicas=2))
        await fed.reach(uid, "Dispatched")
        made = emulator.objects[VOLCANO_QUEUES][("", "llm")]
        assert made["spec"] == {"weight": 3}  # the parent is the Global's
        (job,) = emulator.objects[VOLCANO_JOBS].values()
        assert job["spec"]["queue"] == "llm"
