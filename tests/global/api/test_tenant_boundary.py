"""Issue 38 items 1-2, as a hostile tenant: with a queue-user token, a job that would reach
past its queue into a member cluster (a system or another tenant's namespace, a powerful
service account, privileged or host-sharing pods, nodeName, a system priority class) is
refused with 403 naming the rule and the queue, through REST, /api/v1/apply and kubectl's
/k8s alike, and nothing is stored; an admin-granted queue may still do what it was granted.
The Global runs with the shipped defaults (a queue's own namespace, baseline)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import app_settings, running
from tests.factories import job_document
from tests.factories import queue_document as queue

YAML = {"Content-Type": "application/yaml"}
POD = "spec.tasks[0].template.spec"
CONTAINER = f"{POD}.containers[0]"
# ops: what an admin grants a platform team's queue.
OPS = {
    "global.volcano.sh/namespaces": "ops,infra,kube-system",
    "global.volcano.sh/pod-security": "privileged",
    "global.volcano.sh/service-accounts": "default,builder",
    "global.volcano.sh/system-priority": "true",
}


async def apply(
    client: httpx.AsyncClient,
    *documents: Any,
    headers: dict[str, str] | None = None,
    status: int = 200,
) -> list[dict[str, Any]]:
    """Apply the documents; a refused document makes the answer a 403 with every result."""
    response = await client.post(
        "/api/v1/apply", content=yaml.safe_dump_all(documents), headers=YAML | (headers or {})
    )
    assert response.status_code == status, response.text
    return list(response.json()["items"])


async def user_of(admin: httpx.AsyncClient, queue_name: str) -> dict[str, str]:
    issued = await admin.post(
        "/api/v1/tokens",
        json={"name": f"user of {queue_name}", "role": "queue-user", "queues": [queue_name]},
    )
    assert issued.status_code == 201, issued.text
    return {"Authorization": f"Bearer {issued.json()['token']}"}


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = app_settings(database_url, tenancy={"default_namespaces": ["{queue}"]})
    async with running(settings) as (_, client):
        items = await apply(
            client,
            queue("team-a"),
            queue("team-b"),
            queue("ops", **OPS),
            queue("strict", **{"global.volcano.sh/pod-security": "restricted"}),
        )
        assert [i["result"] for i in items] == ["created"] * 4, items
        yield client


def a_job(queue_name: str = "team-a", namespace: str | None = None) -> dict[str, Any]:
    document = job_document("train", queue=queue_name)
    document["metadata"]["namespace"] = namespace or queue_name
    return document


def pod(document: dict[str, Any]) -> dict[str, Any]:
    return dict(document["spec"]["tasks"][0]["template"]["spec"])


def changed(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = a_job()
    change(document)
    return document


def _spec(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["spec"]["tasks"][0]["template"]["spec"].update(fields)


def _container(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["spec"]["tasks"][0]["template"]["spec"]["containers"][0].update(fields)


def _namespace(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["metadata"].update(namespace=name)


# (what, the change to a clean team-a job, the rule the 403 names, the field it names)
ATTACKS = [
    ("kube-system", _namespace("kube-system"), "reserved namespaces", "metadata.namespace"),
    ("agent's namespace", _namespace("volcano-global-agent"), "reserved namespaces", None),
    ("another tenant's namespace", _namespace("team-b"), "queue namespaces", None),
    (
        "a controller's service account",
        _spec(serviceAccountName="volcano-controllers"),
        "service accounts",
        f"{POD}.serviceAccountName",
    ),
    (
        "privileged",
        _container(securityContext={"privileged": True}),
        "pod security baseline",
        f"{CONTAINER}.securityContext.privileged",
    ),
    (
        "hostPath /",
        _spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        "pod security baseline",
        f"{POD}.volumes[0].hostPath",
    ),
    ("hostNetwork", _spec(hostNetwork=True), "pod security baseline", f"{POD}.hostNetwork"),
    ("hostPID", _spec(hostPID=True), "pod security baseline", f"{POD}.hostPID"),
    (
        "SYS_ADMIN",
        _container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
        "pod security baseline",
        f"{CONTAINER}.securityContext.capabilities.add[0]",
    ),
    ("nodeName", _spec(nodeName="gpu-east-n0"), "scheduler bypass", f"{POD}.nodeName"),
    (
        "system-node-critical",
        lambda d: d["spec"].update(priorityClassName="system-node-critical"),
        "system priority classes",
        "spec.priorityClassName",
    ),
    (
        "system-cluster-critical in the pod template",
        _spec(priorityClassName="system-cluster-critical"),
        "system priority classes",
        f"{POD}.priorityClassName",
    ),
]
IDS = [a[0] for a in ATTACKS]


def assert_refused(message: str, rule: str, field: str | None) -> None:
    assert "queue 'team-a' may not run this job in a member cluster" in message, message
    assert f"(rule: {rule})" in message, message
    if field is not None:
        assert f"{field}: " in message, message


async def stored_jobs(admin: httpx.AsyncClient) -> list[str]:
    return [j["name"] for j in (await admin.get("/api/v1/jobs")).json()["items"]]


@pytest.mark.parametrize(("what", "change", "rule", "field"), ATTACKS, ids=IDS)
async def test_rest_refuses_each_attack(
    admin: httpx.AsyncClient, what: str, change: Any, rule: str, field: str | None
) -> None:
    user = await user_of(admin, "team-a")
    refused = await admin.post("/api/v1/jobs", json=changed(change), headers=user)
    assert refused.status_code == 403, refused.text
    assert_refused(refused.json()["message"], rule, field)
    assert await stored_jobs(admin) == []
    # The same job without the attack is the tenant's to run.
    assert (await admin.post("/api/v1/jobs", json=a_job(), headers=user)).status_code == 201


@pytest.mark.parametrize(("what", "change", "rule", "field"), ATTACKS, ids=IDS)
async def test_apply_refuses_each_attack(
    admin: httpx.AsyncClient, what: str, change: Any, rule: str, field: str | None
) -> None:
    user = await user_of(admin, "team-a")
    clean = a_job()
    clean["metadata"]["name"] = "clean"
    items = await apply(admin, changed(change), clean, headers=user, status=403)
    assert [(i["result"], i["code"]) for i in items] == [("error", 403), ("created", None)]
    assert_refused(items[0]["message"], rule, field)
    assert await stored_jobs(admin) == ["clean"]


@pytest.mark.parametrize(("what", "change", "rule", "field"), ATTACKS, ids=IDS)
async def test_kubectl_create_refuses_each_attack(
    admin: httpx.AsyncClient, what: str, change: Any, rule: str, field: str | None
) -> None:
    user = await user_of(admin, "team-a")
    document = changed(change)
    namespace = document["metadata"]["namespace"]
    path = f"/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
    for params in ({"dryRun": "All"}, {}):
        refused = await admin.post(path, json=document, headers=user, params=params)
        assert refused.status_code == 403, refused.text
        status = refused.json()
        assert (status["kind"], status["reason"]) == ("Status", "Forbidden")
        assert_refused(status["message"], rule, field)
    assert await stored_jobs(admin) == []


async def test_an_admin_granted_queue_may_do_what_it_was_granted(
    admin: httpx.AsyncClient,
) -> None:
    user = await user_of(admin, "ops")
    document = a_job("ops", namespace="infra")
    document["spec"]["priorityClassName"] = "system-node-critical"
    document["spec"]["tasks"][0]["template"]["spec"].update(
        hostNetwork=True,
        hostPID=True,
        nodeName="gpu-east-n0",
        serviceAccountName="builder",
        volumes=[{"name": "root", "hostPath": {"path": "/"}}],
    )
    document["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["securityContext"] = {
        "privileged": True
    }
    created = await admin.post("/api/v1/jobs", json=document, headers=user)
    assert created.status_code == 201, created.text
    # Even a granted queue never reaches kube-* (the annotation lists kube-system).
    system = copy.deepcopy(document)
    system["metadata"].update(name="sys", namespace="kube-system")
    refused = await admin.post("/api/v1/jobs", json=system, headers=user)
    assert refused.status_code == 403
    assert "(rule: reserved namespaces)" in refused.json()["message"]
    # Service accounts are still the granted ones.
    other = copy.deepcopy(document)
    other["metadata"]["name"] = "other"
    other["spec"]["tasks"][0]["template"]["spec"]["serviceAccountName"] = "cluster-admin"
    refused = await admin.post("/api/v1/jobs", json=other, headers=user)
    assert "(rule: service accounts)" in refused.json()["message"]


async def test_the_queue_decides_even_for_the_admin(admin: httpx.AsyncClient) -> None:
    document = changed(_container(securityContext={"privileged": True}))
    refused = await admin.post("/api/v1/jobs", json=document)
    assert refused.status_code == 403
    assert_refused(refused.json()["message"], "pod security baseline", None)


async def test_a_hyperjob_member_with_a_privileged_pod_is_refused(
    admin: httpx.AsyncClient,
) -> None:
    user = await user_of(admin, "team-a")
    member = a_job()["spec"]
    privileged = copy.deepcopy(member)
    privileged["tasks"][0]["template"]["spec"]["containers"][0]["securityContext"] = {
        "privileged": True
    }
    hyperjob = {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "llm", "namespace": "team-a"},
        "spec": {
            "replicatedJobs": [
                {"name": "clean", "templateSpec": member},
                {"name": "rogue", "templateSpec": privileged},
            ]
        },
    }
    refused = await admin.post("/api/v1/jobs", json=hyperjob, headers=user)
    assert refused.status_code == 403, refused.text
    assert_refused(
        refused.json()["message"],
        "pod security baseline",
        "spec.replicatedJobs[1].templateSpec.tasks[0].template.spec.containers[0]"
        ".securityContext.privileged",
    )
    hyperjob["spec"]["replicatedJobs"].pop()
    assert (await admin.post("/api/v1/jobs", json=hyperjob, headers=user)).status_code == 201


async def test_a_restricted_queue_takes_only_hardened_pods(admin: httpx.AsyncClient) -> None:
    user = await user_of(admin, "strict")
    plain = a_job("strict")
    refused = await admin.post("/api/v1/jobs", json=plain, headers=user)
    assert refused.status_code == 403
    message = refused.json()["message"]
    assert "(rule: pod security restricted)" in message
    assert f"{CONTAINER}.securityContext.allowPrivilegeEscalation: must be false" in message
    hardened = a_job("strict")
    spec = hardened["spec"]["tasks"][0]["template"]["spec"]
    spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    spec["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert (await admin.post("/api/v1/jobs", json=hardened, headers=user)).status_code == 201


async def test_a_class_an_admin_marks_is_for_granted_queues_only(
    admin: httpx.AsyncClient,
) -> None:
    marked = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "urgent", "annotations": {"global.volcano.sh/restricted": "true"}},
        "value": 900_000_000,
    }
    assert [i["result"] for i in await apply(admin, marked)] == ["created"]
    tenant = a_job()
    tenant["spec"]["priorityClassName"] = "urgent"
    refused = await admin.post("/api/v1/jobs", json=tenant, headers=await user_of(admin, "team-a"))
    assert refused.status_code == 403
    assert_refused(refused.json()["message"], "system priority classes", "spec.priorityClassName")
    granted = a_job("ops")
    granted["spec"]["priorityClassName"] = "urgent"
    created = await admin.post("/api/v1/jobs", json=granted, headers=await user_of(admin, "ops"))
    assert created.status_code == 201, created.text


async def test_a_queue_user_cannot_grant_its_own_queue(admin: httpx.AsyncClient) -> None:
    user = await user_of(admin, "team-a")
    items = await apply(
        admin,
        queue("team-a", **{"global.volcano.sh/pod-security": "privileged"}),
        headers=user,
        status=403,
    )
    assert (items[0]["result"], items[0]["code"]) == ("error", 403)
    bad = await apply(admin, queue("team-c", **{"global.volcano.sh/pod-security": "root"}))
    assert (bad[0]["result"], bad[0]["code"]) == ("error", 422)
    assert "global.volcano.sh/pod-security" in bad[0]["message"]


async def test_kubectl_create_says_nothing_of_another_tenants_job_names(
    admin: httpx.AsyncClient,
) -> None:
    """A name taken in team-b's namespace is team-b's business: team-a's user creating a job
    of that name there is refused for the namespace (403), as for a free name, not told that
    it exists (409)."""
    path = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/team-b/jobs"
    theirs = a_job("team-b")
    assert (await admin.post(path, json=theirs)).status_code == 201
    user = await user_of(admin, "team-a")
    probe = a_job("team-a", namespace="team-b")
    refused = await admin.post(path, json=probe, headers=user)
    assert refused.status_code == 403, refused.text
    assert_refused(refused.json()["message"], "queue namespaces", "metadata.namespace")
    again = await admin.post(path, json=theirs)  # whoever may use the namespace: 409
    assert again.status_code == 409, again.text
    assert again.json()["message"] == 'jobs.batch.volcano.sh "train" already exists'
