"""The agent's RBAC covers every API call it makes: the agent runs against the Kubernetes API
emulator, every request is turned into (verb, API group, resource, namespace), and each must be
allowed by the roles the member overlay renders (a cluster-wide ClusterRole that reads, and the
write role bound in each namespace the agent serves, and nowhere else). The emulator runs kube-apiserver's
OwnerReferencesPermissionEnforcement admission with that ClusterRole as the authorizer, as
OpenShift and hardened clusters do, so the rendezvous Service and ServiceExport (owned by the
Volcano Job) are created only if the role allows what the plugin asks."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlparse

from core_agent.kubernetes.adapter import KubeApi, api_client
from core_agent.kubernetes.source import KubernetesSource
from tests.deploy.manifests import OVERLAYS, find, render
from tests.factories import eventually, job_document, share_assignment
from tests.k8s_emulator.owner_references import Attributes, owner_references_enforcement
from tests.k8s_emulator.server import (
    FLUID_DATASETS,
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
from volcano_global.rpc.copies import (
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
    DataCopyCancellation,
)
from volcano_global.rpc.shares import ShareCancellation, ShareStatus, StagingItem

REPLICA_NAMESPACE = "volcano-global-data"  # `scheduling.data.replica_namespace`'s default
REPLICA = DataCopyAssignment(
    copy_id="0b9c6a4e-2f1d-4c3b-9a8e-7d6f5e4c3b2a",
    namespace=REPLICA_NAMESPACE,
    name="corpus",
    job_uid="",
    item=StagingItem(data_source="corpus", bytes=2**30, destination="/data/corpus/"),
)


def permission(request: str) -> tuple[str, str, str, str]:
    """'GET /api/v1/nodes?watch=true' -> ('watch', '', 'nodes', ''); a discovery path
    ('GET /apis/g/v') -> ('get', '', '', '') (a non-resource URL every user may read)."""
    method, target = request.split(" ", 1)
    url = urlparse(target)
    parts = [p for p in url.path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if not rest:
        return "get", "", "", ""
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, named = rest[0], len(rest) > 1
    if method == "GET":
        watching = parse_qs(url.query).get("watch", [""])[0].lower() in ("1", "true")
        verb = "watch" if watching else "get" if named else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return verb, group, resource, namespace


def allowed(rules: list[dict], verb: str, group: str, resource: str) -> bool:
    return any(
        group in rule.get("apiGroups", [])
        and resource in rule.get("resources", [])
        and verb in rule.get("verbs", [])
        for rule in rules
    )


@dataclass
class AgentRbac:
    """What the agent's service account may do: `cluster` everywhere, `namespaced` in each
    namespace a RoleBinding names."""

    cluster: list[dict]
    namespaced: dict[str, list[dict]] = field(default_factory=dict)

    def allows(self, verb: str, group: str, resource: str, namespace: str = "") -> bool:
        return allowed(self.cluster, verb, group, resource) or allowed(
            self.namespaced.get(namespace, []), verb, group, resource
        )


def authorizer(rbac: AgentRbac):  # type: ignore[no-untyped-def]
    def authorize(asked: Attributes) -> bool:
        resource = f"{asked.resource}/{asked.subresource}" if asked.subresource else asked.resource
        return rbac.allows(asked.verb, asked.group, resource, asked.namespace)

    return authorize


def agent_rbac() -> AgentRbac:
    docs = render(OVERLAYS[2])
    agent = {"kind": "ServiceAccount", "name": "volcano-global-agent"}

    def bound(binding: dict) -> bool:
        return any(
            {k: s.get(k) for k in agent} == agent and s.get("namespace") == "volcano-global-agent"
            for s in binding["subjects"]
        )

    def rules(binding: dict) -> list[dict]:
        return list(find(docs, binding["roleRef"]["kind"], binding["roleRef"]["name"])["rules"])

    rbac = AgentRbac(cluster=[])
    for binding in docs:
        if binding["kind"] == "ClusterRoleBinding" and bound(binding):
            rbac.cluster += rules(binding)
        elif binding["kind"] == "RoleBinding" and bound(binding):
            namespace = binding["metadata"]["namespace"]
            rbac.namespaced[namespace] = rbac.namespaced.get(namespace, []) + rules(binding)
    return rbac


async def run_agent(rbac: AgentRbac) -> tuple[KubeEmulator, list[ShareStatus]]:
    """The agent's whole life against an emulated cluster whose admission authorises with
    `rules`: watch, run the rank-0 share of a split job (its staging Job, then its Volcano
    Job, rendezvous Service and ServiceExport), apply it again, then cancel it."""
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
    emulator.register(FLUID_DATASETS, "Dataset", namespaced=True)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    emulator.create(NAMESPACES, {"metadata": {"name": REPLICA_NAMESPACE}})
    emulator.admission.append(owner_references_enforcement(authorizer(rbac), emulator.types))
    client = await api_client(host=host)
    source = KubernetesSource(KubeApi(client), watch_timeout_s=1)
    reports: list[ShareStatus] = []
    copies: list[CopyStatus] = []
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
            staging=(StagingItem(data_source="corpus", bytes=2**30, destination="/data/c"),),
        )
        for _ in range(2):
            source.apply_share(assignment, reports.append)
            await asyncio.sleep(0.3)
        source.cancel_share(ShareCancellation(placement_id=assignment.placement_id), reports.append)
        await asyncio.sleep(0.3)
        emulator.jobs.run_s = 60.0  # still copying when stopped
        source.apply_copy(REPLICA, copies.append)  # a replica's staging Job, then its stop
        made = ("create", "batch", "jobs", REPLICA_NAMESPACE)
        await eventually(lambda: made in {permission(r) for r in emulator.requests})
        source.cancel_copy(DataCopyCancellation(copy_id=REPLICA.copy_id, reason="x"), copies.append)
        await eventually(lambda: any(c.phase.ended for c in copies))
    finally:
        await source.stop()
        await client.close()
        await emulator.stop()
    assert [c.phase for c in copies if c.phase.ended] == [CopyPhase.STOPPED], copies
    return emulator, reports


async def test_rbac_covers_every_call_the_agent_makes() -> None:
    rbac = agent_rbac()
    emulator, reports = await run_agent(rbac)

    calls = {permission(r) for r in emulator.requests} - {("get", "", "", "")}
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
        ("create", "batch", "jobs"),
        ("list", "batch", "jobs"),
        ("watch", "batch", "jobs"),
        ("delete", "batch", "jobs"),
        ("create", "", "services"),
        ("list", "", "services"),
        ("delete", "", "services"),
        ("create", "multicluster.x-k8s.io", "serviceexports"),
        ("list", "multicluster.x-k8s.io", "serviceexports"),
        ("delete", "multicluster.x-k8s.io", "serviceexports"),
        ("list", "", "persistentvolumeclaims"),
        ("watch", "", "persistentvolumeclaims"),
        ("list", "data.fluid.io", "datasets"),
        ("watch", "data.fluid.io", "datasets"),
    } <= {call[:3] for call in calls}
    phases = [r.phase for r in reports]  # each apply answered (the watch may add one)
    assert set(phases[:-1]) == {"Staging", "Accepted"}
    assert len(phases) >= 3
    assert phases[-1] == "Cancelled"
    assert [r.warning for r in reports if r.warning] == []  # admission let both through
    missing = sorted(c for c in calls if not rbac.allows(*c))
    assert missing == [], f"the agent's roles do not allow {missing}"


def test_the_agent_writes_only_in_the_namespaces_it_serves() -> None:
    rbac = agent_rbac()
    assert sorted(rbac.namespaced) == ["llm", "ml", "research", REPLICA_NAMESPACE]
    # In the replica namespace: staging Jobs, nothing else (a replica runs no member job).
    for verb in ("create", "delete", "list", "watch"):
        assert rbac.allows(verb, "batch", "jobs", REPLICA_NAMESPACE)
    for group, resource in (("batch.volcano.sh", "jobs"), ("", "services"), ("", "pods")):
        assert not rbac.allows("create", group, resource, REPLICA_NAMESPACE), resource
    for namespace in ("ml", "llm", "research"):
        assert rbac.allows("create", "batch.volcano.sh", "jobs", namespace)
        assert rbac.allows("delete", "", "services", namespace)
    for namespace in ("kube-system", "volcano-global-agent", "default", "other", ""):
        for group, resource in (
            ("batch.volcano.sh", "jobs"),
            ("", "services"),
            ("multicluster.x-k8s.io", "serviceexports"),
            ("", "pods"),
            ("", "secrets"),
        ):
            for verb in ("create", "delete", "update", "patch"):
                assert not rbac.allows(verb, group, resource, namespace), (verb, resource)
    # Reading stays cluster-wide: the inventory and the member jobs' watch.
    assert rbac.allows("watch", "", "nodes") and rbac.allows("watch", "batch.volcano.sh", "jobs")
    assert not rbac.allows("get", "", "secrets", "kube-system")


async def test_without_delete_on_services_owner_references_are_refused() -> None:
    """The role the agent had before: create only. OwnerReferencesPermissionEnforcement
    refuses the owned Service, and the user is told why."""
    rbac = agent_rbac()
    rules = [r for r in rbac.namespaced["ml"] if "services" not in r.get("resources", [])]
    rules.append({"apiGroups": [""], "resources": ["services"], "verbs": ["create", "list"]})
    rbac.namespaced["ml"] = rules
    emulator, reports = await run_agent(rbac)

    warnings = {r.warning for r in reports if r.warning}
    assert len(warnings) == 1
    assert "cannot set an ownerRef on a resource you can't delete" in warnings.pop()
    assert not emulator.objects[SERVICE_EXPORTS]
