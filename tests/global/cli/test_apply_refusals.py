"""`vglobal apply -f` when the token is refused some documents (403 with every result) or the
whole call, against a real `vglobal server` process (SQLite and Postgres)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import yaml

from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, job_document
from tests.server_process import VGLOBAL, ServerProcess


def apply_as(server: ServerProcess, token: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = {**server.env, "VGLOBAL_SERVER": server.url, "VGLOBAL_TOKEN": token}
    return subprocess.run(
        [*VGLOBAL, "apply", "-f", str(path)], env=env, capture_output=True, text=True, timeout=60
    )


def test_apply_prints_each_documents_result_and_fails_when_any_was_refused(
    server: ServerProcess, tmp_path: Path
) -> None:
    admin = httpx.Client(
        timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert admin.post("/api/v1/queues", json={"name": "llm"}).status_code == 201
    issued = {
        role: admin.post(
            "/api/v1/tokens",
            json={
                "name": f"{role} of ml",
                "role": role,
                "queues": ["llm"] if role != "reader" else [],
            },
        ).json()["token"]
        for role in ("queue-user", "reader")
    }
    path = tmp_path / "mixed.yaml"
    path.write_text(
        yaml.safe_dump_all(
            [job_document("mine", queue="llm"), job_document("theirs", queue="default")]
        )
    )
    mixed = apply_as(server, issued["queue-user"], path)
    assert mixed.returncode == 1, mixed.stderr
    assert mixed.stdout.splitlines() == ["job.batch.volcano.sh/ml/mine created"]
    assert mixed.stderr.splitlines() == [
        "error: document 1 (Job theirs): this token may not submit to queue 'default' "
        "(allowed: llm)"
    ]
    refused = apply_as(server, issued["reader"], path)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert "403 Forbidden: reader of ml (reader token) may not submit" in refused.stderr
    trail = [r["message"] for r in admin.get("/api/v1/audit").json()["items"]]
    assert trail[0].startswith("DENIED reader of ml: POST /api/v1/apply (")
    assert trail[1].startswith("DENIED queue-user of ml: POST /api/v1/apply (document 1 (Job")
