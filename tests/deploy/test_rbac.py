"""The agent's RBAC covers every API call it makes: the agent runs against the Kubernetes API
emulator, every request is turned into (verb, API group, resource), and each must be allowed
by the ClusterRole the member overlay renders. The emulator runs kube-apiserver's
OwnerReferencesPermissionEnforcement admission with that ClusterRole as the authorizer, as
OpenShift and hardened clusters do, so the rendezvous Service and ServiceExport (owned by the
Volcano Job) are created only if the role allows what the plugin asks."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs, urlparse

from core_agent.kubernetes.adapter import KubeApi, api_client
from core_agent.kubernetes.source import KubernetesSource
from tests.deploy.manifests import OVERLAYS, find, render
from tests.factories import job_document, share_assignment
from tests.k8s_emulator.owner_references import Attributes, owner_references_enforcement
from tests.k8s_emulator.server import (
    HYPERNODES,
    NAMESPACES,
    NODES,
    PODS,
    SERVICE_EXPORTS,
    VOLCANO_JOBS,
    VOLCANO_QUEUES,
    KubeEmulator,
)
from volcano_global.jobspec.queue_document import queue_document
from volcano_global.rpc.shares import ShareCancellation, ShareStatus


def permission(request: str) -> tuple[str, str, str]:
    """'GET /api/v1/nodes?watch=true' -> ('watch', '', 'nodes'); a discovery path
    ('GET /apis/g/v') -> ('get', '', '') (a non-resource URL every user may read)."""
    method, target = request.split(" ", 1)
    url = urlparse(target)
    parts = [p for p in url.path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if not rest:
        return "get", "", ""
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


def authorizer(rules: list[dict]):  # type: ignore[no-untyped-def]
    def authorize(asked: Attributes) -> bool:
        resource = f"{asked.resource}/{asked.subresource}" if asked.subresource else asked.resource
        return allowed(rules, asked.verb, asked.group, resource)

    return authorize


def agent_rules() -> list[dict]:
    return find(render(OVERLAYS[2]), "ClusterRole", "volcano-global-agent")["rules"]


async def run_agent(rules: list[dict]) -> tuple[KubeEmulator, list[ShareStatus]]:
    """The agent's whole life against an emulated cluster whose admission authorises with
    `rules`: watch, run the rank-0 share of a split job (Volcano Job, rendezvous Service and
    ServiceExport), apply it again, then cancel it."""
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
    emulator.register(VOLCANO_QUEUES, "Queue", namespaced=False)
    emulator.register(SERVICE_EXPORTS, "ServiceExport", namespaced=True)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    emulator.admission.append(owner_references_enforcement(authorizer(rules), emulator.types))
    client = await api_client(host=host)
    source = KubernetesSource(KubeApi(client), watch_timeout_s=1)
    reports: list[ShareStatus] = []
    try:
        await source.start()
        emulator.create(NODES, {"metadata": {"name": "n1"}, "status": {}})
        assignment = share_assignment(
            pods=1,
            cluster_count=2,
            rendezvous_address="train-0123abcd-rdzv.ml.svc.clusterset.local:29500",
            manifest_json=json.dumps(job_document("train", replicas=2, queue="llm")),
            queue_json=json.dumps(
                queue_document(
                    name="llm", spec={"weight": 2}, labels={}, annotations={}, state="Open"
                )
            ),
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
    return emulator, reports


async def test_rbac_covers_every_call_the_agent_makes() -> None:
    rules = agent_rules()
    emulator, reports = await run_agent(rules)

    calls = {permission(r) for r in emulator.requests} - {("get", "", "")}
    assert {
        ("list", "", "nodes"),
        ("watch", "", "nodes"),
        ("list", "", "pods"),
        ("watch", "", "pods"),
        ("list", "topology.volcano.sh", "hypernodes"),
        ("watch", "topology.volcano.sh", "hypernodes"),
        ("get", "scheduling.volcano.sh", "queues"),
        ("create", "scheduling.volcano.sh", "queues"),
        ("create", "batch.volcano.sh", "jobs"),
        ("get", "batch.volcano.sh", "jobs"),
        ("list", "batch.volcano.sh", "jobs"),
        ("delete", "batch.volcano.sh", "jobs"),
        ("create", "", "services"),
        ("list", "", "services"),
        ("delete", "", "services"),
        ("create", "multicluster.x-k8s.io", "serviceexports"),
        ("list", "multicluster.x-k8s.io", "serviceexports"),
        ("delete", "multicluster.x-k8s.io", "serviceexports"),
    } <= calls
    phases = [r.phase for r in reports]  # each apply answered (the watch may add one)
    assert set(phases[:-1]) == {"Accepted"}
    assert len(phases) >= 3
    assert phases[-1] == "Cancelled"
    assert [r.warning for r in reports if r.warning] == []  # admission let both through
    missing = sorted(c for c in calls if not allowed(rules, *c))
    assert missing == [], f"the agent's ClusterRole does not allow {missing}"


async def test_without_delete_on_services_owner_references_are_refused() -> None:
    """The role the agent had before: create only. OwnerReferencesPermissionEnforcement
    refuses the owned Service, and the user is told why."""
    rules = [r for r in agent_rules() if "services" not in r.get("resources", [])]
    rules.append({"apiGroups": [""], "resources": ["services"], "verbs": ["create", "list"]})
    emulator, reports = await run_agent(rules)

    warnings = {r.warning for r in reports if r.warning}
    assert len(warnings) == 1
    assert "cannot set an ownerRef on a resource you can't delete" in warnings.pop()
    assert not emulator.objects[SERVICE_EXPORTS]
