"""Authentication and the admin/agent split on every endpoint."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.factories import create_cluster, inventory, job_document
from volcano_global.app import create_app
from volcano_global.settings import Settings

ADMIN_ONLY = [
    ("GET", "/api/v1/clusters"),
    ("POST", "/api/v1/clusters"),
    ("DELETE", "/api/v1/clusters/gpu-east"),
    ("POST", "/api/v1/clusters/gpu-east/token"),
    ("GET", "/api/v1/clusters/gpu-east/events"),
    ("GET", "/api/v1/links"),
    ("POST", "/api/v1/links"),
    ("DELETE", "/api/v1/links/gpu-east/gpu-west"),
    ("GET", "/api/v1/queues"),
    ("POST", "/api/v1/queues"),
    ("GET", "/api/v1/queues/default"),
    ("PATCH", "/api/v1/queues/default"),
    ("DELETE", "/api/v1/queues/default"),
    ("GET", "/api/v1/jobs"),
    ("POST", "/api/v1/jobs"),
    ("GET", "/api/v1/jobs/00000000-0000-0000-0000-000000000000"),
    ("POST", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/cancel"),
    ("GET", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/events"),
    ("GET", "/metrics"),
]


@pytest.mark.parametrize(("method", "path"), ADMIN_ONLY)
async def test_every_endpoint_needs_a_valid_token(
    api: httpx.AsyncClient, method: str, path: str
) -> None:
    missing = await api.request(method, path, headers={"Authorization": ""}, json={})
    assert missing.status_code == 401, missing.text
    assert missing.headers["www-authenticate"] == "Bearer"
    bad = await api.request(method, path, headers={"Authorization": "Bearer vg_wrong"}, json={})
    assert bad.status_code == 401
    assert bad.json()["message"] == "invalid or revoked token"


@pytest.mark.parametrize(("method", "path"), ADMIN_ONLY)
async def test_agent_token_cannot_call_admin_endpoints(
    api: httpx.AsyncClient, method: str, path: str
) -> None:
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    response = await api.request(
        method, path, headers={"Authorization": f"Bearer {token}"}, json={}
    )
    assert response.status_code == 403, response.text
    assert response.json()["message"].startswith("agent:gpu-east (agent token) may not ")


async def test_agent_token_is_bound_to_its_cluster(api: httpx.AsyncClient) -> None:
    east = (await create_cluster(api, "gpu-east"))["agentToken"]
    await create_cluster(api, "gpu-west")
    own = {"Authorization": f"Bearer {east}"}
    assert (
        await api.put(
            "/api/v1/clusters/gpu-east/inventory", json=inventory("gpu-east"), headers=own
        )
    ).status_code == 200
    assert (await api.get("/api/v1/clusters/gpu-east", headers=own)).status_code == 200
    assert (await api.get("/api/v1/clusters/gpu-east/topology", headers=own)).status_code == 200
    response = await api.put(
        "/api/v1/clusters/gpu-west/inventory", json=inventory("gpu-west"), headers=own
    )
    assert response.status_code == 403
    assert response.json()["message"] == "agent:gpu-east may not act for another cluster"
    assert (await api.get("/api/v1/clusters/gpu-west", headers=own)).status_code == 403


async def test_health_needs_no_token(api: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz"):
        response = await api.get(path, headers={"Authorization": ""})
        assert response.status_code == 200, path


async def test_metrics_report_jobs_and_gpus(api: httpx.AsyncClient) -> None:
    await create_cluster(api, "gpu-east")
    await api.put("/api/v1/clusters/gpu-east/inventory", json=inventory("gpu-east"))
    text = (await api.get("/metrics")).text
    assert 'vglobal_cluster_gpus{cluster="gpu-east",gpu_model="H100",kind="total"} 64.0' in text
    assert 'vglobal_jobs{state="Pending"} 0.0' in text
    assert (
        'vglobal_http_requests_total{method="PUT",route="/api/v1/clusters/{name}/inventory",status="200"} 1.0'
        in text
    )


async def test_metrics_report_pending_jobs_and_their_wait_per_queue(
    api: httpx.AsyncClient,
) -> None:
    """As Kueue per ClusterQueue: every queue's waiting jobs (0 when none waits, rather than
    no series) and how long the oldest has waited."""
    await api.post("/api/v1/queues", json={"name": "llm"})
    for name in ("a", "b"):
        assert (await api.post("/api/v1/jobs", json=job_document(name, queue="llm"))).is_success
    text = (await api.get("/metrics")).text
    assert 'vglobal_queue_pending_jobs{queue="llm"} 2.0' in text
    assert 'vglobal_queue_pending_jobs{queue="default"} 0.0' in text
    oldest = re.search(r'^vglobal_queue_oldest_pending_seconds\{queue="llm"\} (\S+)$', text, re.M)
    assert oldest is not None and 0 <= float(oldest.group(1)) < 60
    assert "# TYPE vglobal_queue_wait_seconds histogram" in text


async def test_generated_admin_token_is_printed_once_and_works(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(database_url=database_url, admin_token=None, grpc_port=0)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        printed = capsys.readouterr().err
        token = next(w for w in printed.split() if w.startswith("vg_"))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            ok = await client.get("/api/v1/queues", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200
    app = create_app(settings)  # a restart does not print (or create) another one
    async with app.router.lifespan_context(app):
        assert "vg_" not in capsys.readouterr().err
