"""Every overlay renders and validates against the Kubernetes schemas, and says what it must."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from tests.deploy.manifests import OVERLAYS, find, render

KUBERNETES_VERSIONS = ["1.30.0", "1.33.0"]


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_overlay_validates_against_the_schemas(overlay: Path, version: str) -> None:
    docs = render(overlay)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_overlays_exist() -> None:
    assert {p.name for p in OVERLAYS} == {"management-dev", "management-prod", "member-gpu-east"}


def test_management_overlays() -> None:
    dev, prod = render(OVERLAYS[0]), render(OVERLAYS[1])
    for docs, replicas in ((dev, 2), (prod, 3)):
        deployment = find(docs, "Deployment", "volcano-global")
        assert deployment["spec"]["replicas"] == replicas
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        env = {e["name"]: e for e in container["env"]}
        assert "secretKeyRef" in env["VGLOBAL_DATABASE_URL"]["valueFrom"]
        assert "secretKeyRef" in env["VGLOBAL_ADMIN_TOKEN"]["valueFrom"]
        assert env["VGLOBAL_SCHEDULING__ENABLED"]["value"] == "false"  # the scheduler's job
        scheduler = find(docs, "Deployment", "volcano-global-scheduler")
        assert scheduler["spec"]["replicas"] == 2  # one leads, one stands by
        (scheduling,) = scheduler["spec"]["template"]["spec"]["containers"]
        assert scheduling["args"] == ["scheduler", "--metrics-port", "9090"]
        assert scheduling["ports"] == [{"name": "metrics", "containerPort": 9090}]
        assert "secretKeyRef" in scheduling["env"][0]["valueFrom"]
        assert find(docs, "PodDisruptionBudget", "volcano-global")["spec"]["minAvailable"] == 1
        ports = {
            p["name"]: p["port"] for p in find(docs, "Service", "volcano-global")["spec"]["ports"]
        }
        assert ports == {"http": 8080, "grpc": 8081}
    assert any(d["kind"] == "StatefulSet" for d in dev)  # dev brings its Postgres...
    assert not any(
        d["kind"] in ("StatefulSet", "Secret") for d in prod
    )  # ...prod points at a managed one
    assert find(prod, "Service", "volcano-global-agents")["spec"]["type"] == "LoadBalancer"


def test_member_overlay_runs_one_agent_on_the_control_plane() -> None:
    docs = render(OVERLAYS[2])
    deployment = find(docs, "Deployment", "volcano-global-agent")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "volcano-global-agent"
    assert "node-role.kubernetes.io/control-plane" in pod["nodeSelector"]
    assert find(docs, "ConfigMap", "volcano-global-agent")["data"]["CLUSTER_NAME"] == "gpu-east"
    args = pod["containers"][0]["args"]
    assert "--source=kubernetes" in args
    assert "--cluster=$(CLUSTER_NAME)" in args


def test_the_shutdown_budget_fits_in_the_pods_grace_period() -> None:
    # A replica that outlives its grace period is SIGKILLed mid-stop: its budget must be less.
    for overlay in OVERLAYS[:2]:
        docs = render(overlay)
        budget = float(
            find(docs, "ConfigMap", "volcano-global")["data"]["VGLOBAL_SHUTDOWN_BUDGET_S"]
        )
        for name in ("volcano-global", "volcano-global-scheduler"):
            pod = find(docs, "Deployment", name)["spec"]["template"]["spec"]
            assert budget + 5 <= pod["terminationGracePeriodSeconds"], (overlay.name, name)
