"""A real cluster fails transiently: API Priority and Fairness answers 429 with Retry-After,
Volcano's webhook is unreachable (500), the API server restarts (503, a dropped connection), a
CRD is installed after the agent started. None of it fails a share; only the API server
refusing the object does. Through the real kubernetes-asyncio client against the emulator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from core_agent.client import AgentClient
from core_agent.kubernetes.adapter import KubeApi, api_client
from core_agent.kubernetes.retry import RetryPolicy
from core_agent.kubernetes.shares import MemberJobs
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.kube_objects import node, populate
from tests.factories import REPLY_S, eventually, job_document, share_assignment
from tests.k8s_emulator.faults import DISCONNECT
from tests.k8s_emulator.server import HYPERNODES, NAMESPACES, NODES, VOLCANO_JOBS, KubeEmulator
from tests.server_process import free_port
from volcano_global.rpc.shares import ShareCancellation, SharePhase, ShareStatus

JOBS_IN_ML = "/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
FAST = RetryPolicy(initial_s=0.05, cap_s=0.2, slow_after_s=60.0)
ASSIGNMENT = share_assignment(manifest_json=json.dumps(job_document("train", replicas=2)))


@asynccontextmanager
async def cluster(
    *, volcano: bool = True, hypernodes: bool = True
) -> AsyncIterator[tuple[KubeEmulator, KubeApi]]:
    """6 nodes (under HyperNodes, or without the HyperNode CRD), namespace `ml` and Volcano's
    Job CRD unless `volcano` is False; the agent looks discovery up again every 0.1 s."""
    emulator = KubeEmulator()
    host = await emulator.start()
    if hypernodes:
        populate(emulator)
    else:
        for i in range(6):
            emulator.create(NODES, node(f"n{i}"))
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    if volcano:
        emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    client = await api_client(host=host)
    try:
        yield emulator, KubeApi(client, rediscover_s=0.1)
    finally:
        await client.close()
        await emulator.stop()


def phases(reports: list[ShareStatus]) -> list[SharePhase]:
    return [r.phase for r in reports]


async def test_a_create_throttled_and_refused_by_a_down_webhook_still_runs_the_share() -> None:
    async with cluster() as (emulator, api):
        faults = [
            emulator.faults.add("POST", JOBS_IN_ML, 429, retry_after=1),
            emulator.faults.add("POST", JOBS_IN_ML, 500),
            emulator.faults.add("POST", JOBS_IN_ML, 503),
            emulator.faults.add("POST", JOBS_IN_ML, 504),
            emulator.faults.add("POST", JOBS_IN_ML, DISCONNECT),  # POST: aiohttp never repeats
        ]
        shares = MemberJobs(api, retry=FAST)
        reports: list[ShareStatus] = []
        started = asyncio.get_running_loop().time()
        shares.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: bool(reports))

        assert phases(reports) == [SharePhase.ACCEPTED]
        assert reports[0].warning == ""  # quick enough not to warn
        assert [f.hits for f in faults] == [1, 1, 1, 1, 1]
        assert asyncio.get_running_loop().time() - started >= 1.0  # Retry-After honoured
        assert len(emulator.objects[VOLCANO_JOBS]) == 1
        await shares.stop()


async def test_the_user_is_warned_while_the_cluster_keeps_refusing_then_it_runs() -> None:
    async with cluster() as (emulator, api):
        down = emulator.faults.add("POST", JOBS_IN_ML, 500, times=10_000)
        shares = MemberJobs(api, retry=RetryPolicy(initial_s=0.05, cap_s=0.1, slow_after_s=0.3))
        reports: list[ShareStatus] = []
        shares.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: bool(reports))
        (warned,) = reports
        assert warned.phase is SharePhase.ACCEPTED
        assert "still trying" in warned.warning
        assert "failed calling webhook" in warned.warning  # the API server's own words
        assert not emulator.objects[VOLCANO_JOBS]

        down.times = down.hits  # the webhook is back
        await eventually(lambda: len(reports) == 2)
        assert phases(reports) == [SharePhase.ACCEPTED, SharePhase.ACCEPTED]
        assert len(emulator.objects[VOLCANO_JOBS]) == 1
        await shares.stop()


async def test_an_invalid_volcano_job_fails_the_share_with_the_servers_message() -> None:
    async with cluster() as (emulator, api):
        emulator.faults.add("POST", JOBS_IN_ML, 422)
        shares = MemberJobs(api, retry=FAST)
        reports: list[ShareStatus] = []
        shares.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: bool(reports))
        assert phases(reports) == [SharePhase.FAILED]
        assert "spec.minAvailable in body should be greater than or equal to 0" in (
            reports[0].message
        )
        await shares.stop()


async def test_volcano_installed_after_the_agent_started_then_runs_the_share() -> None:
    async with cluster(volcano=False) as (emulator, api):
        shares = MemberJobs(api, retry=FAST)
        reports: list[ShareStatus] = []
        shares.apply_share(ASSIGNMENT, reports.append)
        # The create is answered 404 and discovery has no batch.volcano.sh: not a failure.
        await eventually(lambda: sum("namespaces/ml/jobs" in r for r in emulator.requests) >= 2)
        assert reports == []

        emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
        await eventually(lambda: bool(reports))
        assert phases(reports) == [SharePhase.ACCEPTED]
        assert len(emulator.objects[VOLCANO_JOBS]) == 1
        await shares.stop()


async def test_a_share_cancelled_while_its_creation_waits_is_cancelled() -> None:
    async with cluster(volcano=False) as (emulator, api):
        shares = MemberJobs(api, retry=RetryPolicy(initial_s=60.0, cap_s=60.0))
        reports: list[ShareStatus] = []
        shares.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: any("namespaces/ml/jobs" in r for r in emulator.requests))
        shares.cancel_share(
            ShareCancellation(placement_id=ASSIGNMENT.placement_id, reason="by the user"),
            reports.append,
        )
        await eventually(lambda: bool(reports), within=30)  # not after the 60 s backoff
        assert phases(reports) == [SharePhase.CANCELLED]
        await shares.stop()


async def test_a_hypernode_crd_installed_later_is_watched() -> None:
    async with cluster(hypernodes=False) as (emulator, api):
        source = KubernetesSource(api, watch_timeout_s=5)
        await source.start()  # no HyperNode CRD: topology from labels meanwhile
        assert not source.hypernodes
        emulator.register(HYPERNODES, "HyperNode", namespaced=False)
        emulator.create(
            HYPERNODES,
            {
                "metadata": {"name": "tor-a"},
                "spec": {
                    "tier": 1,
                    "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}],
                },
            },
        )
        await eventually(lambda: "/tor-a" in source.hypernodes)
        assert source.current().nodes["n0"].domain == "tor-a"
        await source.stop()


async def test_a_transient_404_on_volcano_jobs_does_not_fail_a_running_share() -> None:
    async with cluster() as (emulator, api):
        source = KubernetesSource(api, watch_timeout_s=1)
        source.shares.retry = FAST
        reports: list[ShareStatus] = []
        await source.start()
        source.apply_share(ASSIGNMENT, reports.append)
        await eventually(lambda: len(emulator.objects[VOLCANO_JOBS]) == 1)
        (job,) = emulator.objects[VOLCANO_JOBS].values()
        status = {"state": {"phase": "Running"}, "running": 2}
        emulator.patch(VOLCANO_JOBS, "train-0123abcd", {"status": status}, namespace="ml")
        await eventually(lambda: SharePhase.RUNNING in phases(reports))

        # The collection answers 404 for a while (lists and watches alike), and the history
        # is compacted so the watch must list again, into the 404s.
        gone = emulator.faults.add("GET", "/apis/batch.volcano.sh/v1alpha1/jobs", 404, times=3)
        emulator.compact()
        await eventually(lambda: gone.hits == 3)
        status = {"state": {"phase": "Completed"}, "succeeded": 2}
        emulator.patch(VOLCANO_JOBS, job["metadata"]["name"], {"status": status}, namespace="ml")
        await eventually(lambda: SharePhase.SUCCEEDED in phases(reports))
        assert SharePhase.FAILED not in phases(reports)
        await source.stop()


async def test_an_agent_whose_api_server_never_answers_stops_when_told() -> None:
    """SIGTERM (the stop event) while the source still waits for its first lists: the agent
    ends at once, its watches stopped, instead of waiting for the kubelet's SIGKILL."""
    client = await api_client(host=f"http://127.0.0.1:{free_port()}")  # nothing listens
    try:
        source = KubernetesSource(KubeApi(client))
        agent = AgentClient(
            cluster="c", target=f"127.0.0.1:{free_port()}", token="t", source=source
        )
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop=stop))
        stop.set()  # before the first lists could ever end
        await asyncio.wait_for(running, timeout=REPLY_S)
        watches = [t for t in asyncio.all_tasks() if t.get_name().startswith("watch-")]
        assert watches == []
    finally:
        await client.close()
