"""Schemathesis against the OpenAPI document of a real `vglobal server` process (SQLite and
Postgres): generated requests for every operation - the coverage phase's boundary and invalid
values, random fuzzing, and stateful sequences that follow created resources - with the token
of each role (see below for which database). None may get a 5xx or leave a traceback in the server's log, and at least 1,000
cases must run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.factories import job_document
from tests.server_process import ServerProcess

ST = Path(sys.executable).with_name("st")
# Random cases per operation: the admin reaches every write path; the other roles mostly meet
# refusals, for which fewer suffice (the coverage phase's cases, ~2,000, are not counted here).
EXAMPLES = {"admin": 40, "reader": 15, "queue-user": 15}


@pytest.fixture(autouse=True)
def _no_rate_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of requests of one token: without the per-token rate limit (before the
    server starts), so that they reach the endpoints instead of a 429."""
    monkeypatch.setenv("VGLOBAL_RATE_LIMIT__ENABLED", "false")


# Every role on Postgres (production's database); the admin, who reaches every write path,
# on SQLite too. The other roles mostly meet refusals, which do not differ by database.
# A run takes 1-3 minutes; on a loaded host one passed the suite's 300 s bound, whose thread
# method then ended the whole worker: the bound is the run's own, less than the subprocess's.
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("server", "role"),
    [
        ("sqlite", "admin"),
        ("postgres", "admin"),
        ("postgres", "reader"),
        ("postgres", "queue-user"),
    ],
    indirect=["server"],
)
def test_no_generated_request_gets_a_server_error(
    server: ServerProcess, tmp_path: Path, role: str
) -> None:
    api = server.admin_with_cluster()
    api.post("/api/v1/queues", json={"name": "llm"})
    api.post("/api/v1/jobs", json=job_document("train"))
    token = ADMIN_TOKEN
    if role != "admin":
        queues = {"queues": ["llm", "default"]} if role == "queue-user" else {}
        issued = api.post("/api/v1/tokens", json={"name": role, "role": role, **queues})
        token = issued.json()["token"]
    result = subprocess.run(
        [
            str(ST),
            "run",
            f"{server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            "not_a_server_error",
            "--phases",
            "coverage,fuzzing,stateful",
            "--max-examples",
            str(EXAMPLES[role]),
            "--seed",
            "1",
            "--no-color",
            "--report",
            "junit",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=tmp_path,  # its cache stays out of the repository
    )
    summary = result.stdout[result.stdout.find("SUMMARY") :]
    assert result.returncode == 0, summary or result.stdout[-3000:] + result.stderr
    cases = re.search(r"(\d+) generated, (\d+) passed", summary)
    assert cases is not None, summary
    generated, passed = int(cases.group(1)), int(cases.group(2))
    print(f"schemathesis as {role}: {generated} generated, {passed} passed")
    assert generated >= 1000, summary
    assert passed == generated, summary
    selected = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", summary)
    assert selected is not None, summary
    assert len(set(selected.groups())) == 1, summary  # every operation of the API was tested
    log = server.log.read_text()
    assert "Traceback" not in log, log[log.find("Traceback") :][:4000]
