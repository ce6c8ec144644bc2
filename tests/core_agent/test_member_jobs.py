"""Member Volcano Jobs as a real cluster takes them: named within Volcano's and Kubernetes'
limits for the longest job name the Global accepts, admitted by the emulator's Volcano webhook
and CRD schema; every Volcano phase after Running reported; a share Volcano restarts alone
makes the Global restart the gang in every cluster."""

from __future__ import annotations

from typing import Any

import pytest

from core_agent.kubernetes.shares import share_phase
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import federation
from tests.core_agent.test_kubernetes_shares import member_cluster, set_phase, two_members
from tests.factories import eventually, job_document, split_annotations
from tests.k8s_emulator.server import SERVICES, VOLCANO_JOBS, KubeEmulator
from volcano_global.rpc.shares import SharePhase


def _job(phase: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "m", "annotations": {}},
        "status": {"state": {"phase": phase}, **status},
    }


@pytest.mark.parametrize(
    ("phase", "status", "expected"),
    [
        ("Pending", {}, SharePhase.ACCEPTED),
        ("Running", {}, SharePhase.RUNNING),
        ("Completing", {}, SharePhase.RUNNING),  # CompleteJob or minSuccess: pods stopping
        ("Completed", {}, SharePhase.SUCCEEDED),
        ("Restarting", {"retryCount": 1}, SharePhase.RESTARTING),
        ("Running", {"retryCount": 1}, SharePhase.RESTARTING),  # restarted while unwatched
        ("Pending", {"retryCount": 2}, SharePhase.RESTARTING),
        ("Aborting", {}, SharePhase.FAILED),  # AbortJob kills the pods now
        ("Aborted", {}, SharePhase.FAILED),
        ("Terminating", {}, SharePhase.FAILED),
        ("Terminated", {}, SharePhase.FAILED),
        ("Failed", {"retryCount": 3}, SharePhase.FAILED),  # maxRetry reached: it failed
    ],
)
def test_every_volcano_phase_is_a_share_phase(
    phase: str, status: dict[str, Any], expected: SharePhase
) -> None:
    assert share_phase([_job(phase, **status)])[0] is expected


def _members(emulator: KubeEmulator) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in emulator.objects[VOLCANO_JOBS].values()}


async def test_a_63_character_job_restarted_in_one_cluster_restarts_everywhere(
    database_url: str,
) -> None:
    async with two_members(database_url) as (fed, east, west):
        name = "llama-70b-sft-" + "x" * 49  # 63: the longest name the Global accepts
        doc = job_document(
            name, replicas=8, policies=[{"event": "PodFailed", "action": "RestartJob"}]
        )
        doc["metadata"]["annotations"] = {**split_annotations(2), "volcano.sh/preemptable": "false"}
        doc["metadata"]["labels"] = {"team": "llm"}
        uid = await fed.submit(doc)

        # The emulator's Volcano webhook and CRD schema admitted both member jobs.
        await eventually(lambda: len(_members(east)) == 1 and len(_members(west)) == 1)
        clusters = {"east": east, "west": west}
        first = {c: next(iter(_members(e).values())) for c, e in clusters.items()}
        for vcjob in first.values():
            meta = vcjob["metadata"]
            (task,) = vcjob["spec"]["tasks"]
            assert len(f"{meta['name']}-worker-{task['replicas'] - 1}") <= 63  # pod hostnames
            assert meta["labels"]["team"] == "llm"
            assert meta["annotations"]["volcano.sh/preemptable"] == "false"
        await eventually(lambda: any(e.objects[SERVICES] for e in clusters.values()))
        services = [s for e in clusters.values() for s in e.objects[SERVICES].values()]
        # The rank-0 cluster's `<member>-rdzv`, a DNS-1035 label the emulator admitted.
        assert [s["metadata"]["name"].endswith("-rdzv") for s in services] == [True]

        for cluster, vcjob in first.items():
            set_phase(clusters[cluster], vcjob, "Running", running=4)
        await fed.reach(uid, "Running")

        # Volcano's RestartJob in east (a pod failed): east's ranks come back new while west's
        # wait for the old ones. The Global restarts the job in both clusters.
        set_phase(east, first["east"], "Restarting", retryCount=1)
        message = await fed.event(uid, "ShareRestarted")
        assert "east: Restarting" in message and "requeued (retry 1/3)" in message

        (old,) = {vcjob["metadata"]["name"] for vcjob in first.values()}  # one placement

        def placed_again() -> bool:
            names = [list(_members(e)) for e in clusters.values()]
            return all(len(n) == 1 and n[0] != old for n in names)

        await eventually(placed_again)  # the old members deleted, a new placement in both
        job = await fed.job(uid)
        assert job["requeues"] == 1
        assert job["state"] in ("Placed", "Dispatched")


async def test_what_volcano_refuses_fails_the_share_with_volcanos_word(database_url: str) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        # The Global now refuses at submission every document the emulated Volcano refuses
        # (a dependency on a missing task was this test's example before), so the member
        # cluster's refusal is injected: its API server refuses the Job by the CRD's schema,
        # as a member on a Volcano version other than the Global's may.
        emulator.faults.add("POST", "/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs", 422)
        uid = await fed.submit(job_document("train", replicas=2))

        message = await fed.event(uid, "GangWithdrawn")
        assert "k8s: Failed" in message
        assert "spec.minAvailable in body should be greater than or equal to 0" in message
        assert not emulator.objects[VOLCANO_JOBS]
