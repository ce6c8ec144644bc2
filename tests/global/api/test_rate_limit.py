"""A request rate limit per token (issue 38 item 3): a token over its bucket gets 429 with
Retry-After and a Kubernetes Status, in /api/v1 and /k8s; other tokens and the admin do not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import ADMIN_TOKEN, app_settings
from tests.factories import job_document
from volcano_global.api import rate_limit
from volcano_global.api.rate_limit import TokenBuckets
from volcano_global.app import create_app

KUBE_JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
BURST = 5


@pytest.fixture
async def limited(database_url: str) -> AsyncIterator[FastAPI]:
    """A server whose tokens may make 5 requests at once, then one every 10 s."""
    settings = app_settings(database_url, rate_limit={"rate_per_s": 0.1, "burst": BURST})
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


def client(app: FastAPI, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://vglobal.test",
        headers={"Authorization": f"Bearer {token}"},
    )


async def issued(admin: httpx.AsyncClient, role: str, **body: object) -> str:
    response = await admin.post("/api/v1/tokens", json={"name": f"{role} t", "role": role, **body})
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


async def test_a_token_over_its_rate_gets_429_with_retry_after_in_both_apis(
    limited: FastAPI,
) -> None:
    async with client(limited, ADMIN_TOKEN) as admin:
        user, other = [await issued(admin, "queue-user", queues=["default"]) for _ in range(2)]
        async with client(limited, user) as api, client(limited, other) as neighbour:
            answers = [(await api.get("/api/v1/jobs")).status_code for _ in range(BURST)]
            assert answers == [200] * BURST
            refused = await api.post("/api/v1/jobs", json=job_document("a"))
            assert refused.status_code == 429
            # A token each 10 s, less what refilled while the burst was sent (a slow machine)
            retry = int(refused.headers["Retry-After"])
            assert 1 <= retry <= 10
            assert refused.json() == {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "TooManyRequests",
                "message": "too many requests: this token may make 0.1 requests a second "
                f"(bursts of 5); retry after {retry} s",
                "code": 429,
            }
            kubectl = await api.get(KUBE_JOBS)
            assert kubectl.status_code == 429
            assert 1 <= int(kubectl.headers["Retry-After"]) <= retry
            # Nothing was submitted; another token and the admin are not held back.
            assert (await neighbour.get("/api/v1/jobs")).json()["items"] == []
        for _ in range(3 * BURST):
            assert (await admin.get("/api/v1/jobs")).status_code == 200


async def test_a_stored_admin_token_is_not_limited_once_authenticated(limited: FastAPI) -> None:
    async with client(limited, ADMIN_TOKEN) as admin:
        stored = await issued(admin, "admin")
    async with client(limited, stored) as api:
        for _ in range(3 * BURST):
            assert (await api.get("/api/v1/jobs")).status_code == 200


async def test_without_the_limit_a_token_is_not_refused(database_url: str) -> None:
    settings = app_settings(database_url, rate_limit={"enabled": False, "burst": 1})
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        async with client(application, ADMIN_TOKEN) as admin:
            user = await issued(admin, "reader")
        async with client(application, user) as api:
            for _ in range(5):
                assert (await api.get("/api/v1/jobs")).status_code == 200


def test_a_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    now = [0.0]
    buckets = TokenBuckets(2.0, 3, clock=lambda: now[0])
    assert [buckets.take("t") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("t") == pytest.approx(0.5)  # one request every 0.5 s
    now[0] = 0.5
    assert buckets.take("t") == 0.0
    assert buckets.take("u") == 0.0  # buckets are per token
    now[0] = 100.0
    assert [buckets.take("t") for _ in range(4)][-1] > 0  # refilled to the burst, not beyond


def test_idle_tokens_are_forgotten_beyond_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rate_limit, "MAX_BUCKETS", 10)
    now = [0.0]
    buckets = TokenBuckets(1.0, 2, clock=lambda: now[0])
    for n in range(10):
        buckets.take(f"idle{n}")
    now[0] = 10.0
    buckets.take("busy")
    buckets.take("busy")
    assert buckets.take("new") == 0.0  # over the bound: the full (idle) buckets go
    assert buckets.take("busy") > 0  # the busy token's empty bucket stays
