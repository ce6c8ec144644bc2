"""Token roles: a reader reads and changes nothing; a queue user submits to, sees and cancels
only its queues' jobs; tokens are revocable and expire; every denial says who and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.factories import create_cluster, create_queue, job_document
from volcano_global.db.base import utcnow
from volcano_global.services.tenancy import tokens


async def token(api: httpx.AsyncClient, role: str, **body: object) -> dict:
    response = await api.post(
        "/api/v1/tokens", json={"name": f"{role} of tests", "role": role, **body}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def bearer(issued: dict) -> dict[str, str]:
    return {"Authorization": f"Bearer {issued['token']}"}


def in_an_hour() -> str:
    return (datetime.now(UTC) + timedelta(hours=1)).isoformat()


def an_hour_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens are checked from now on as if an hour and a second had passed."""
    monkeypatch.setattr(tokens, "utcnow", lambda: utcnow() + timedelta(hours=1, seconds=1))


async def test_a_reader_reads_everything_and_changes_nothing(api: httpx.AsyncClient) -> None:
    await create_cluster(api, "gpu-east")
    uid = (await api.post("/api/v1/jobs", json=job_document("train"))).json()["uid"]
    reader = bearer(await token(api, "reader"))
    for path in (
        "/api/v1/clusters",
        "/api/v1/clusters/gpu-east",
        "/api/v1/links",
        "/api/v1/queues",
        "/api/v1/jobs",
        f"/api/v1/jobs/{uid}",
        f"/api/v1/jobs/{uid}/events",
        "/api/v1/overview",
        "/api/v1/scheduling/rounds",
        "/metrics",  # docs/operations.md's `grafana` reader token scrapes it
    ):
        assert (await api.get(path, headers=reader)).status_code == 200, path
    for method, path, body in (
        ("POST", "/api/v1/clusters", {"name": "x"}),
        ("POST", "/api/v1/jobs", job_document("other")),
        ("POST", f"/api/v1/jobs/{uid}/cancel", None),
        ("POST", "/api/v1/queues", {"name": "q"}),
        ("POST", "/api/v1/tokens", {"name": "n", "role": "admin"}),
    ):
        denied = await api.request(method, path, headers=reader, json=body)
        assert denied.status_code == 403, (path, denied.text)
        assert denied.json()["message"].startswith("reader of tests (reader token) may not")


async def test_a_queue_user_only_sees_and_uses_its_queues(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    await create_queue(api, "research")
    theirs = (await api.post("/api/v1/jobs", json=job_document("theirs", queue="research"))).json()
    user = bearer(await token(api, "queue-user", queues=["llm"]))

    mine = await api.post("/api/v1/jobs", json=job_document("mine", queue="llm"), headers=user)
    assert mine.status_code == 201, mine.text
    refused = await api.post(
        "/api/v1/jobs", json=job_document("sneaky", queue="research"), headers=user
    )
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        "this token may not submit to queue 'research' (allowed: llm)"
    )
    listed = (await api.get("/api/v1/jobs", headers=user)).json()["items"]
    assert [j["name"] for j in listed] == ["mine"]
    assert [q["name"] for q in (await api.get("/api/v1/queues", headers=user)).json()["items"]] == [
        "llm"
    ]
    for path in (
        f"/api/v1/jobs/{theirs['uid']}",
        f"/api/v1/jobs/{theirs['uid']}/events",
        "/api/v1/queues/research",
    ):
        assert (await api.get(path, headers=user)).status_code == 403, path
    assert (await api.post(f"/api/v1/jobs/{theirs['uid']}/cancel", headers=user)).status_code == 403
    cancelled = await api.post(f"/api/v1/jobs/{mine.json()['uid']}/cancel", headers=user)
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "Cancelled"
    assert (await api.post("/api/v1/queues", json={"name": "q"}, headers=user)).status_code == 403
    scrape = await api.get("/metrics", headers=user)  # it would show every queue
    assert scrape.status_code == 403
    assert "may not read /metrics" in scrape.json()["message"]


async def test_tokens_are_listed_without_secrets_revocable_and_expire(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    issued = await token(api, "reader")
    listed = (await api.get("/api/v1/tokens")).json()["items"]
    assert issued["id"] in [t["id"] for t in listed]
    assert all("token" not in t for t in listed)
    assert (await api.get("/api/v1/jobs", headers=bearer(issued))).status_code == 200
    revoked = await api.delete(f"/api/v1/tokens/{issued['id']}")
    assert revoked.status_code == 200
    assert revoked.json()["revokedAt"] is not None
    after = await api.get("/api/v1/jobs", headers=bearer(issued))
    assert after.status_code == 401
    assert after.json()["message"] == "invalid or revoked token"

    short = await token(api, "reader", expiresAt=in_an_hour())
    assert (await api.get("/api/v1/jobs", headers=bearer(short))).status_code == 200
    an_hour_later(monkeypatch)
    expired = await api.get("/api/v1/jobs", headers=bearer(short))
    assert expired.status_code == 401
    assert expired.json()["message"] == "token expired"


async def test_a_submission_checks_its_token_like_any_call(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submissions authenticate without the request's session (the job writer stores them):
    the same refusals hold there - missing, unknown, revoked, expired, or not a submitter."""
    await create_queue(api, "llm")
    user = await token(api, "queue-user", queues=["llm"])

    async def submit(headers: dict[str, str], name: str) -> httpx.Response:
        return await api.post("/api/v1/jobs", json=job_document(name, queue="llm"), headers=headers)

    assert (await submit(bearer(user), "ok")).status_code == 201
    assert (await submit({"Authorization": ""}, "none")).status_code == 401
    assert (await submit({"Authorization": "Bearer vg_nope"}, "unknown")).status_code == 401
    reader = await token(api, "reader")
    assert (await submit(bearer(reader), "reader")).status_code == 403
    await api.delete(f"/api/v1/tokens/{user['id']}")
    revoked = await submit(bearer(user), "revoked")
    assert revoked.status_code == 401
    assert revoked.json()["message"] == "invalid or revoked token"
    short = await token(api, "queue-user", queues=["llm"], expiresAt=in_an_hour())
    assert (await api.get("/api/v1/jobs", headers=bearer(short))).status_code == 200
    an_hour_later(monkeypatch)
    expired = await submit(bearer(short), "late")
    assert expired.status_code == 401
    assert expired.json()["message"] == "token expired"
    names = [j["name"] for j in (await api.get("/api/v1/jobs")).json()["items"]]
    assert names == ["ok"]


async def test_token_requests_are_validated(api: httpx.AsyncClient) -> None:
    cases = [
        ({"name": "n", "role": "queue-user"}, "queues"),
        ({"name": "n", "role": "queue-user", "queues": ["nope"]}, "queues[0]"),
        ({"name": "n", "role": "reader", "queues": ["default"]}, "queues"),
        ({"name": "n", "role": "agent"}, "role"),
        ({"name": "n", "role": "reader", "expiresAt": "2000-01-01T00:00:00Z"}, "expiresAt"),
    ]
    for body, field in cases:
        response = await api.post("/api/v1/tokens", json=body)
        assert response.status_code == 422, (body, response.text)
        causes = response.json()["details"]["causes"]
        assert any(c["field"].endswith(field) for c in causes), (body, causes)
    assert (
        await api.delete("/api/v1/tokens/00000000-0000-0000-0000-000000000000")
    ).status_code == 404


async def test_every_accepted_change_is_audited_with_who(api: httpx.AsyncClient) -> None:
    await create_queue(api, "llm")
    user = await token(api, "queue-user", queues=["llm"])
    await api.post("/api/v1/jobs", json=job_document("mine", queue="llm"), headers=bearer(user))
    await api.post("/api/v1/jobs", json=job_document("no", queue="default"), headers=bearer(user))
    trail = [e["message"] for e in (await api.get("/api/v1/audit")).json()["items"]]
    assert trail[:4] == [
        "DENIED queue-user of tests: POST /api/v1/jobs (this token may not submit to queue "
        "'default' (allowed: llm))",
        "queue-user of tests: POST /api/v1/jobs",
        "admin: POST /api/v1/tokens",
        "admin: POST /api/v1/queues",
    ]  # newest first; the refused submission changed nothing but is in the trail
    reader = bearer(await token(api, "reader"))
    assert (await api.get("/api/v1/audit", headers=reader)).status_code == 403
    assert (await api.delete("/api/v1/queues/llm", headers=reader)).status_code == 403
    assert (await api.get("/api/v1/audit", headers=reader)).status_code == 403  # a read: not kept
    trail = [e["message"] for e in (await api.get("/api/v1/audit")).json()["items"]]
    assert trail[0].startswith("DENIED reader of tests: DELETE /api/v1/queues/llm (")
    assert not any("GET /api/v1/audit" in line for line in trail)
    # No valid token: refused and not recorded (anyone could fill the trail).
    bad = {"Authorization": "Bearer vg_not_a_token"}
    assert (await api.post("/api/v1/queues", json={"name": "x"}, headers=bad)).status_code == 401
    after = [e["message"] for e in (await api.get("/api/v1/audit")).json()["items"]]
    assert after == trail
