"""Cancelling a share removes everything the agent made for it in the member cluster: every
page of its Volcano Jobs and the rendezvous Service and ServiceExport, deleted by the agent
itself (the emulator, like a cluster whose garbage collector lags, collects nothing)."""

from __future__ import annotations

import copy
import json

from core_agent.kubernetes.adapter import KubeApi, api_client
from core_agent.kubernetes.retry import RetryPolicy
from core_agent.kubernetes.shares import MemberJobs
from tests.factories import eventually, job_document, share_assignment
from tests.k8s_emulator.server import (
    NAMESPACES,
    SERVICE_EXPORTS,
    SERVICES,
    VOLCANO_JOBS,
    KubeEmulator,
)
from volcano_global.jobspec.members import PLACEMENT_LABEL
from volcano_global.rpc.shares import ShareCancellation, SharePhase, ShareStatus


async def test_cancel_deletes_every_page_of_member_jobs_and_the_rendezvous_objects() -> None:
    emulator = KubeEmulator()
    host = await emulator.start()
    emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    emulator.register(SERVICE_EXPORTS, "ServiceExport", namespaced=True)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    client = await api_client(host=host)
    shares = MemberJobs(KubeApi(client), retry=RetryPolicy(initial_s=0.05, cap_s=0.1), page_size=2)
    reports: list[ShareStatus] = []
    try:
        # The rank-0 share of a split job: its Volcano Job, Service and ServiceExport.
        assignment = share_assignment(
            cluster_count=2,
            rendezvous_address="train-0123abcd-rdzv.ml.svc.clusterset.local:29500",
            manifest_json=json.dumps(job_document("train", replicas=2)),
        )
        shares.apply_share(assignment, reports.append)
        await eventually(lambda: bool(reports))
        assert not reports[0].warning
        # More member jobs of the placement than fit a page (a HyperJob's children), and one
        # of another placement that must stay.
        (made,) = emulator.objects[VOLCANO_JOBS].values()
        for i in range(4):
            extra = copy.deepcopy(made)
            extra["metadata"] = {**made["metadata"], "name": f"train-child-{i}"}
            emulator.create(VOLCANO_JOBS, extra)
        other = copy.deepcopy(made)
        other["metadata"] = {"name": "other", "namespace": "ml", "labels": {PLACEMENT_LABEL: "x"}}
        emulator.create(VOLCANO_JOBS, other)
        assert len(emulator.objects[SERVICES]) == len(emulator.objects[SERVICE_EXPORTS]) == 1

        # Deletes meet a throttled API server and a 404 naming nothing on a served type (not
        # "already gone": the job is still there): both retried, not skipped.
        throttled = emulator.faults.add("DELETE", "/jobs/train-child-0", 429, retry_after=0)
        lost = emulator.faults.add("DELETE", "/jobs/train-child-1", 404)
        shares.cancel_share(
            ShareCancellation(placement_id=assignment.placement_id, reason="by the user"),
            reports.append,
        )
        await eventually(lambda: reports[-1].phase is SharePhase.CANCELLED)

        assert throttled.hits == lost.hits == 1
        assert list(emulator.objects[VOLCANO_JOBS]) == [("ml", "other")]
        assert not emulator.objects[SERVICES]
        assert not emulator.objects[SERVICE_EXPORTS]
        lists = [r for r in emulator.requests if r.startswith("GET /apis/batch.volcano.sh")]
        assert sum("continue=" in r for r in lists) == 2  # 5 jobs, pages of 2
        deletes = {r.split("?")[0] for r in emulator.requests if r.startswith("DELETE")}
        assert "DELETE /api/v1/namespaces/ml/services/train-0123abcd-rdzv" in deletes
        assert (
            "DELETE /apis/multicluster.x-k8s.io/v1alpha1/namespaces/ml/serviceexports/"
            "train-0123abcd-rdzv" in deletes
        )
    finally:
        await shares.stop()
        await client.close()
        await emulator.stop()
