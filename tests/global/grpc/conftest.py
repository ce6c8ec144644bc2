"""The agent-stream tests' cluster: gpu-east, registered through the API."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import create_cluster


@pytest.fixture
async def east(api: httpx.AsyncClient) -> str:
    """gpu-east's agent token."""
    return str((await create_cluster(api, "gpu-east"))["agentToken"])
