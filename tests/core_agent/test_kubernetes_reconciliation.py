"""Level-triggered reconciliation with the Kubernetes source, through the real
kubernetes-asyncio client against the API emulator over HTTP, the real gRPC stream and the real
database: what the member cluster's labelled Volcano Jobs say it holds is what counts, whatever
the agent remembered before it restarted."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import federation
from tests.core_agent.test_kubernetes_shares import member_cluster, set_phase, volcano_jobs
from tests.factories import eventually, job_document
from tests.k8s_emulator.server import VOLCANO_JOBS, KubeEmulator

PLACEMENT = "global.volcano.sh/placement"


def placements(emulator: KubeEmulator) -> set[str]:
    return {v["metadata"]["labels"][PLACEMENT] for v in volcano_jobs(emulator)}


def names(emulator: KubeEmulator) -> set[str]:
    return {v["metadata"]["name"] for v in volcano_jobs(emulator)}


def stale_copy(vcjob: dict[str, Any], *, name: str, placement: str) -> dict[str, Any]:
    """A member Volcano Job of `placement` (as one left behind, or restored from a backup)."""
    stale = copy.deepcopy(vcjob)
    stale.pop("status", None)
    stale["metadata"] = {
        "name": name,
        "namespace": vcjob["metadata"]["namespace"],
        "labels": {**vcjob["metadata"]["labels"], PLACEMENT: placement},
        "annotations": vcjob["metadata"].get("annotations", {}),
    }
    return stale


async def test_a_kubernetes_agent_restarted_within_the_heartbeat_timeout_reconciles(
    database_url: str,
) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        # A job that ended (cancelled): its placement is over, its Volcano Job deleted.
        ended = await fed.submit(job_document("ended", replicas=1))
        ended_placement = (await fed.reach(ended, "Dispatched"))["placement"]["uid"]
        template = volcano_jobs(emulator)[0]
        assert (await fed.api.post(f"/api/v1/jobs/{ended}/cancel")).status_code == 200
        await eventually(lambda: not volcano_jobs(emulator))

        started = await fed.submit(job_document("started", replicas=2))
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        set_phase(emulator, volcano_jobs(emulator)[0], "Running", running=2)
        await fed.reach(started, "Running")
        waiting = await fed.submit(job_document("waiting", replicas=2))
        waiting_placement = (await fed.reach(waiting, "Dispatched"))["placement"]["uid"]

        await fed.leave("k8s")  # back well within the heartbeat timeout (30 s)
        for vcjob in volcano_jobs(emulator):  # deleted in the cluster while the agent was down
            emulator.delete(VOLCANO_JOBS, vcjob["metadata"]["name"], namespace="ml")
        orphans = {"ended-stale": ended_placement, "unknown": str(uuid.uuid4())}
        for name, placement in orphans.items():
            emulator.create(VOLCANO_JOBS, stale_copy(template, name=name, placement=placement))
        returned = time.monotonic()
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))

        message = await fed.event(started, "PodEvicted")
        assert "cluster k8s no longer holds its share (2 pods, 16 GPUs)" in message
        assert "requeued (retry 1/3)" in message
        # The share that never started is sent again: its Volcano Job exists again.
        await eventually(lambda: waiting_placement in placements(emulator))
        assert (await fed.job(waiting))["placement"]["uid"] == waiting_placement
        # The orphans (an ended placement's, an unknown one's) are deleted in the cluster.
        await eventually(lambda: not names(emulator) & set(orphans))
        print(f"reconciled {time.monotonic() - returned:.2f} s after the agent's return")
        # The lost job is placed again (a new placement, a new Volcano Job), and runs.
        job = await fed.reach(started, "Dispatched")
        new = job["placement"]["uid"]
        await eventually(lambda: new in placements(emulator))
        vcjob = next(v for v in volcano_jobs(emulator) if v["metadata"]["labels"][PLACEMENT] == new)
        set_phase(emulator, vcjob, "Running", running=2)
        await fed.reach(started, "Running")
