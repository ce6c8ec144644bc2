"""A hostile tenant and the audit trail (issue 38, items 8-9): refusals inside /api/v1/apply
are 403 and audited per document; records name the token by id and the client by the socket
peer (X-Forwarded-For only from a listed proxy); reserved token names are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import ADMIN_TOKEN, app_settings, running
from tests.factories import REPLY_S, create_queue, job_document, priority_class, volcano_queue
from tests.server_process import ServerProcess

YAML = {"Content-Type": "application/yaml"}
QUEUE = volcano_queue("llm", weight=9)
DEFAULT_CLASS = priority_class("everyone-first", 100000, globalDefault=True)


async def issue(api: httpx.AsyncClient, name: str, role: str, **body: object) -> dict[str, Any]:
    response = await api.post("/api/v1/tokens", json={"name": name, "role": role, **body})
    assert response.status_code == 201, response.text
    return dict(response.json())


def bearer(issued: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {issued['token']}"}


async def trail(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await api.get("/api/v1/audit")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def test_refusals_inside_apply_are_403_with_every_result_and_each_is_audited(
    api: httpx.AsyncClient,
) -> None:
    """Before: 200, the three refusals only as per-document 403s and none in the trail."""
    await create_queue(api, "llm")
    user = await issue(api, "ops", "queue-user", queues=["llm"])
    documents = [
        QUEUE,
        DEFAULT_CLASS,
        job_document("theirs", queue="default"),
        job_document("mine", queue="llm"),
    ]
    response = await api.post(
        "/api/v1/apply", content=yaml.safe_dump_all(documents), headers={**YAML, **bearer(user)}
    )
    assert response.status_code == 403, response.text
    body = response.json()
    assert [(i["result"], i["code"]) for i in body["items"]] == [
        ("error", 403),
        ("error", 403),
        ("error", 403),
        ("created", None),
    ]
    assert body["message"] == (
        "ops was refused 3 of 4 documents: document 0 (Queue llm), document 1 "
        "(PriorityClass everyone-first), document 2 (Job theirs)"
    )
    assert (await api.get("/api/v1/queues/llm")).json()["weight"] == 2  # unchanged
    classes = (await api.get("/api/v1/priorityclasses")).json()["items"]
    assert "everyone-first" not in [c["metadata"]["name"] for c in classes]

    records = (await trail(api))[:4]
    denied = sorted(r["message"] for r in records if r["message"].startswith("DENIED"))
    assert len(denied) == 3
    assert denied[0].startswith("DENIED ops: POST /api/v1/apply (document 0 (Queue llm): ops")
    assert denied[1].startswith(
        "DENIED ops: POST /api/v1/apply (document 1 (PriorityClass everyone-first): ops"
    )
    assert denied[2].startswith("DENIED ops: POST /api/v1/apply (document 2 (Job theirs): ")
    assert "'default'" in denied[2]
    assert [r["message"] for r in records].count("ops: POST /api/v1/apply") == 1  # the job
    assert {r["tokenId"] for r in records} == {user["id"]}

    again = await api.post(  # the allowed part alone: nothing refused, 200
        "/api/v1/apply",
        content=yaml.safe_dump(job_document("mine", queue="llm")),
        headers={**YAML, **bearer(user)},
    )
    assert again.status_code == 200, again.text
    assert again.json()["items"][0]["result"] == "unchanged"


async def test_queues_and_classes_applied_by_an_admin_are_audited_once_each_change(
    api: httpx.AsyncClient,
) -> None:
    """Before: a Queue or PriorityClass created or replaced through apply left no record."""
    documents = yaml.safe_dump_all([QUEUE, DEFAULT_CLASS])
    assert (await api.post("/api/v1/apply", content=documents, headers=YAML)).status_code == 200
    assert [r["message"] for r in (await trail(api))] == ["admin: POST /api/v1/apply"] * 2
    unchanged = await api.post("/api/v1/apply", content=documents, headers=YAML)
    assert [i["result"] for i in unchanged.json()["items"]] == ["unchanged", "unchanged"]
    assert len(await trail(api)) == 2  # nothing changed: nothing recorded


async def test_a_record_names_the_token_by_id_and_the_caller_by_its_socket_address(
    api: httpx.AsyncClient,
) -> None:
    """Before: only the token's free-text name, no id, no address. A forged X-Forwarded-For
    is not believed (no proxy is trusted by default)."""
    await create_queue(api, "llm")
    user = await issue(api, "ops", "queue-user", queues=["llm"])
    forged = {**bearer(user), "X-Forwarded-For": "10.9.9.9"}
    assert (
        await api.post("/api/v1/jobs", json=job_document("a", queue="llm"), headers=forged)
    ).status_code == 201
    assert (
        await api.post("/api/v1/jobs", json=job_document("b", queue="default"), headers=forged)
    ).status_code == 403
    newest = await trail(api)
    assert [(r["message"][:16], r["tokenId"], r["clientAddress"]) for r in newest[:4]] == [
        ("DENIED ops: POST", user["id"], "127.0.0.1"),
        ("ops: POST /api/v", user["id"], "127.0.0.1"),
        ("admin: POST /api", None, "127.0.0.1"),  # the settings' admin token has no row
        ("admin: POST /api", None, "127.0.0.1"),
    ]


@pytest.fixture
async def behind_a_proxy(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The Global with the test client's address (127.0.0.1) listed as a trusted proxy."""
    settings = app_settings(database_url, audit={"trusted_proxies": ["127.0.0.0/8", "10.0.0.0/8"]})
    async with running(settings) as (_, client):
        yield client


async def test_forwarded_for_is_believed_only_back_to_the_first_untrusted_hop(
    behind_a_proxy: httpx.AsyncClient,
) -> None:
    api = behind_a_proxy
    for name, forwarded in (
        ("a", "198.51.100.7"),  # the proxy saw the client
        ("b", "6.6.6.6, 203.0.113.5, 10.1.2.3"),  # the client wrote the first hop itself
        ("c", "not-an-address, 10.1.2.3"),  # no proxy writes that: the one that forwarded it
    ):
        response = await api.post(
            "/api/v1/queues", json={"name": name}, headers={"X-Forwarded-For": forwarded}
        )
        assert response.status_code == 201, response.text
    assert (await api.post("/api/v1/queues", json={"name": "d"})).status_code == 201
    addresses = [r["clientAddress"] for r in (await trail(api))[:4]]
    assert addresses == ["127.0.0.1", "10.1.2.3", "203.0.113.5", "198.51.100.7"]


@pytest.mark.parametrize(
    "name",
    [
        "admin",
        " Admin ",
        "\uff21\uff24\uff2d\uff29\uff2e",  # ADMIN in fullwidth letters: reads as admin
        "bootstrap-admin",
        "system:masters",
        "agent:gpu-east",
        "job ml/train",
        "ad\u200bmin",  # a zero-width space
    ],
)
async def test_reserved_token_names_are_refused_naming_the_rule(
    api: httpx.AsyncClient, name: str
) -> None:
    """Before: 201 (a queue-user token named `admin` read like the admin in the trail)."""
    response = await api.post(
        "/api/v1/tokens", json={"name": name, "role": "queue-user", "queues": ["default"]}
    )
    assert response.status_code == 422, response.text
    [cause] = response.json()["details"]["causes"]
    assert cause["field"] == "name"
    assert "reserved" in cause["message"] or "invisible" in cause["message"]


async def test_names_near_the_reserved_ones_are_free(api: httpx.AsyncClient) -> None:
    for name in ("administrators", "ops-admin", "jobs-bot", "agents of ml"):
        await issue(api, name, "reader")


def test_a_real_server_records_its_socket_peer_not_a_forged_forwarded_for(
    server: ServerProcess,
) -> None:
    """uvicorn believes X-Forwarded-For from loopback peers unless told not to; the server
    tells it not to, so the record shows the peer."""
    admin = httpx.Client(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    response = admin.post(
        "/api/v1/queues", json={"name": "llm"}, headers={"X-Forwarded-For": "10.9.9.9"}
    )
    assert response.status_code == 201, response.text
    [record] = admin.get("/api/v1/audit").json()["items"]
    assert (record["message"], record["clientAddress"]) == (
        "admin: POST /api/v1/queues",
        "127.0.0.1",
    )
