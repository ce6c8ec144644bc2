"""The agent's RBAC covers every API call it makes: the agent runs against the Kubernetes API
emulator, every request is turned into (verb, API group, resource), and each must be allowed
by the ClusterRole the member overlay renders."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs, urlparse

from core_agent.kubernetes.adapter import KubeApi, api_client
from core_agent.kubernetes.source import KubernetesSource
from tests.deploy.manifests import OVERLAYS, find, render
from tests.factories import job_document, share_assignment
from tests.k8s_emulator.server import (
    HYPERNODES,
    NAMESPACES,
    NODES,
    PODS,
    SERVICE_EXPORTS,
    VOLCANO_JOBS,
    KubeEmulator,
)
from volcano_global.rpc.shares import ShareCancellation, ShareStatus


def permission(request: str) -> tuple[str, str, str]:
    """'GET /api/v1/nodes?watch=true' -> ('watch', '', 'nodes')."""
    method, target = request.split(" ", 1)
    url = urlparse(target)
    parts = [p for p in url.path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource, named = rest[0], len(rest) > 1
    if method == "GET":
        watching = parse_qs(url.query).get("watch", [""])[0].lower() in ("1", "true")
        verb = "watch" if watching else "get" if named else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return verb, group, resource


def allowed(rules: list[dict], verb: str, group: str, resource: str) -> bool:
    return any(
        group in rule.get("apiGroups", [])
        and resource in rule.get("resources", [])
        and verb in rule.get("verbs", [])
        for rule in rules
    )


async def test_rbac_covers_every_call_the_agent_makes() -> None:
    emulator = KubeEmulator()
    host = await emulator.start()
    emulator.register(HYPERNODES, "HyperNode", namespaced=False)
    emulator.create(NODES, {"metadata": {"name": "n0"}, "status": {}})
    emulator.create(
        PODS,
        {
            "metadata": {"name": "p0", "namespace": "ml"},
            "spec": {"nodeName": "n0", "containers": []},
            "status": {"phase": "Running"},
        },
    )
    emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    emulator.register(SERVICE_EXPORTS, "ServiceExport", namespaced=True)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    client = await api_client(host=host)
    source = KubernetesSource(KubeApi(client), watch_timeout_s=1)
    reports: list[ShareStatus] = []
    try:
        await source.start()
        emulator.create(NODES, {"metadata": {"name": "n1"}, "status": {}})
        # Run the rank-0 share of a split job (Volcano Job, rendezvous Service and
        # ServiceExport), apply it again, then cancel it.
        assignment = share_assignment(
            pods=1,
            cluster_count=2,
            rendezvous_address="train-0123abcd-rdzv.ml.svc.clusterset.local:29500",
            manifest_json=json.dumps(job_document("train", replicas=2)),
        )
        for _ in range(2):
            source.apply_share(assignment, reports.append)
            await asyncio.sleep(0.3)
        source.cancel_share(ShareCancellation(placement_id=assignment.placement_id), reports.append)
        await asyncio.sleep(0.3)
    finally:
        await source.stop()
        await client.close()
        await emulator.stop()

    calls = {permission(r) for r in emulator.requests}
    assert {
        ("list", "", "nodes"),
        ("watch", "", "nodes"),
        ("list", "", "pods"),
        ("watch", "", "pods"),
        ("list", "topology.volcano.sh", "hypernodes"),
        ("watch", "topology.volcano.sh", "hypernodes"),
        ("create", "batch.volcano.sh", "jobs"),
        ("get", "batch.volcano.sh", "jobs"),
        ("delete", "batch.volcano.sh", "jobs"),
        ("create", "", "services"),
        ("create", "multicluster.x-k8s.io", "serviceexports"),
    } <= calls
    phases = [r.phase for r in reports]  # each apply answered (the watch may add one)
    assert set(phases[:-1]) == {"Accepted"}
    assert len(phases) >= 3
    assert phases[-1] == "Cancelled"
    rules = find(render(OVERLAYS[2]), "ClusterRole", "volcano-global-agent")["rules"]
    missing = sorted(c for c in calls if not allowed(rules, *c))
    assert missing == [], f"the agent's ClusterRole does not allow {missing}"
