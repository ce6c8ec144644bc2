"""Fixtures of the agent tests: the Kubernetes API emulator and a client of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core_agent.kubernetes.adapter import KubeApi, api_client
from tests.k8s_emulator.server import KubeEmulator


@pytest.fixture
async def kube() -> AsyncIterator[tuple[KubeEmulator, KubeApi]]:
    emulator = KubeEmulator()
    host = await emulator.start()
    client = await api_client(host=host)
    yield emulator, KubeApi(client)
    await client.close()
    await emulator.stop()
