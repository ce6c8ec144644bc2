"""How the API refuses: who may call is judged before what the call holds, every refused
mutating call is in the audit trail, sizes get 413, no answer echoes the Host header, the
console's headers come with every copy of it, and the interactive docs are off by default."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI

from tests.factories import job_document
from volcano_global.api.console import SECURITY_HEADERS


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def reader_token(api: httpx.AsyncClient) -> str:
    issued = await api.post("/api/v1/tokens", json={"name": "r", "role": "reader"})
    assert issued.status_code == 201, issued.text
    return str(issued.json()["token"])


async def test_a_bad_body_without_a_valid_token_gets_401_not_422(api: httpx.AsyncClient) -> None:
    json_type = {"Content-Type": "application/json"}
    for headers in ({}, bearer("vg_forged")):
        for path in ("/api/v1/queues", "/api/v1/links", "/api/v1/tokens"):
            response = await api.post(
                path, content=b"{bad", headers={**json_type, "Authorization": "", **headers}
            )
            assert response.status_code == 401, (path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
        bad_query = await api.get(
            "/api/v1/jobs", params={"limit": "-1"}, headers=headers or {"Authorization": ""}
        )
        assert bad_query.status_code == 401
    # With a valid token the body is judged, naming the field.
    response = await api.post("/api/v1/queues", json={"name": "q", "weight": 1e308})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "weight"


async def test_a_refused_submission_is_audited(api: httpx.AsyncClient) -> None:
    reader = await reader_token(api)
    refused = await api.post("/api/v1/jobs", json=job_document("nope"), headers=bearer(reader))
    assert refused.status_code == 403
    trail = [e["message"] for e in (await api.get("/api/v1/audit")).json()["items"]]
    assert (
        trail[0] == "DENIED r: POST /api/v1/jobs (r (reader token) may not submit or cancel jobs)"
    )


async def test_a_chunked_body_over_the_cap_gets_413_on_every_endpoint(
    api: httpx.AsyncClient, app: FastAPI
) -> None:
    limit = app.state.settings.limits.max_job_bytes

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"name": "q", "description": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    for path in ("/api/v1/queues", "/api/v1/jobs", "/api/v1/tokens"):
        response = await api.post(
            path, content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413, (path, response.text)
        assert response.json()["reason"] == "RequestEntityTooLarge"


async def test_no_redirect_echoes_the_host(api: httpx.AsyncClient) -> None:
    response = await api.get("/api/v1/jobs/", headers={"Host": "evil.example"})
    assert response.status_code == 404
    assert "location" not in response.headers


async def test_every_copy_of_the_console_has_its_headers(api: httpx.AsyncClient) -> None:
    for path in ("/", "/console/index.html", "/console/app.js"):
        response = await api.get(path)
        assert response.status_code == 200, path
        for name, value in SECURITY_HEADERS.items():
            assert response.headers[name] == value, (path, name)


async def test_the_interactive_docs_are_off_unless_asked(api: httpx.AsyncClient) -> None:
    assert (await api.get("/docs")).status_code == 404
    assert (await api.get("/redoc")).status_code == 404
    assert (await api.get("/openapi.json")).status_code == 200


async def test_container_names_are_dns_labels_and_unique(api: httpx.AsyncClient) -> None:
    doc = job_document("names")
    containers = doc["spec"]["tasks"][0]["template"]["spec"]["containers"]
    containers.append(dict(containers[0]))
    containers.append({**containers[0], "name": "Not_A_Name"})
    response = await api.post("/api/v1/jobs", json=doc)
    assert response.status_code == 422
    fields = {c["field"]: c["message"] for c in response.json()["details"]["causes"]}
    assert (
        fields["spec.tasks[0].template.spec"] == "container name 'trainer' is used more than once"
    )
    assert "spec.tasks[0].template.spec.containers[2].name" in fields
