"""Mistakes made on the first start end with one line naming the fix and a non-zero exit, not
a traceback (issue 37): a Postgres database not created, a `postgresql://` URL (accepted), an
agent with a wrong token or a missing spec file."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx

from tests.conftest import ADMIN_TOKEN, create_postgres_database, drop_postgres_database
from tests.factories import REPLY_S
from tests.server_process import VGLOBAL, ServerProcess


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VGLOBAL, *args], env=env, capture_output=True, text=True, timeout=60)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


def test_a_database_not_created_is_one_line(tmp_path: Path, fresh_database_name: str) -> None:
    url = asyncio.run(create_postgres_database(fresh_database_name))
    asyncio.run(drop_postgres_database(fresh_database_name))  # its server, not it
    server = ServerProcess(url, tmp_path)
    done = run(server.env, "server", "--port", str(server.port))
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert last_line(done).startswith(f"error: database '{fresh_database_name}' does not exist")
    assert f"createdb -h 127.0.0.1 -p 5432 -U postgres {fresh_database_name}" in done.stderr


def test_a_postgresql_url_without_a_driver_is_accepted(
    tmp_path: Path, fresh_database_name: str
) -> None:
    url = asyncio.run(create_postgres_database(fresh_database_name))
    server = ServerProcess(url.replace("postgresql+asyncpg://", "postgresql://"), tmp_path)
    try:
        server.start()
        assert "postgresql+asyncpg://" in server.log.read_text()
    finally:
        server.stop()
        asyncio.run(drop_postgres_database(fresh_database_name))


def test_an_agent_with_a_wrong_token_or_spec_is_one_line(server: ServerProcess) -> None:
    api = httpx.Client(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert api.post("/api/v1/clusters", json={"name": "gpu-east"}).status_code == 201
    target = server.grpc_target
    agent = ["agent", "--cluster", "gpu-east", "--global", target, "--lingjun-block", "0"]
    done = run(server.env, *agent, "--token", "vg_wrong")
    assert done.returncode == 1
    assert last_line(done).startswith("error: the Global refused the agent token of cluster")
    assert "Traceback" not in done.stderr

    missing = run(server.env, "agent", "--cluster", "gpu-east", "--token", "t", "--spec", "no.yaml")
    assert missing.returncode == 2
    assert "'--spec': file 'no.yaml' does not exist" in missing.stderr
