"""Talking to the Global's Kubernetes-compatible API in-process, and reading its answers."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI

from tests.conftest import ADMIN_TOKEN


def kube_client(app: FastAPI, token: str = ADMIN_TOKEN) -> httpx.AsyncClient:
    """A client of `app` with `token`; a watch may take the 30 s timeout."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://vglobal.test",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def listed_names(listed: httpx.Response) -> list[str]:
    """The names in a list answer, in its order."""
    assert listed.status_code == 200, listed.text
    return [item["metadata"]["name"] for item in listed.json()["items"]]


def watched_events(watched: httpx.Response) -> list[dict[str, Any]]:
    """The events of a finished watch answer (one JSON object a line)."""
    assert watched.status_code == 200, watched.text
    return [json.loads(line) for line in watched.text.splitlines() if line]


async def watch_for_a_second(
    kube: httpx.AsyncClient, path: str, resource_version: str | None = None
) -> list[dict[str, Any]]:
    """The events a one-second watch of `path` answers (from `resource_version` when given)."""
    params = {"watch": "true", "timeoutSeconds": "1"}
    if resource_version is not None:
        params["resourceVersion"] = resource_version
    return watched_events(await kube.get(path, params=params))
