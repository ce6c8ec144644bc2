"""An app on each database with fast watches, and an admin client of its Kubernetes API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import app_settings
from tests.kube_api import kube_client
from volcano_global.app import create_app


@pytest.fixture
def application(database_url: str) -> FastAPI:
    settings = app_settings(database_url, kube={"watch_poll_s": 0.05, "bookmark_s": 0.2})
    return create_app(settings)


@pytest.fixture
async def kube(application: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The admin's client, the app running."""
    async with application.router.lifespan_context(application):
        async with kube_client(application) as client:
            yield client
