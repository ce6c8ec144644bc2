"""The emulator on a loopback port and a plain kubernetes-asyncio client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from tests.k8s_emulator.server import KubeEmulator


@pytest.fixture
async def kube() -> AsyncIterator[tuple[KubeEmulator, client.ApiClient]]:
    emulator = KubeEmulator()
    host = await emulator.start()
    api_client = client.ApiClient(client.Configuration(host=host))
    yield emulator, api_client
    await api_client.close()
    await emulator.stop()
