"""Failpoints: off unless armed; armed, the Nth pass kills the process (SIGKILL); a bad spec
is refused with what is wrong."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

SCRIPT = (
    "from volcano_global import failpoints\n"
    "for i in range(3):\n"
    "    print('pass', i, flush=True)\n"
    "    failpoints.hit('round-commit')\n"
)


def run(spec: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VGLOBAL_FAILPOINTS"}
    if spec is not None:
        env["VGLOBAL_FAILPOINTS"] = spec
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )


def test_unarmed_failpoints_do_nothing() -> None:
    done = run(None)
    assert done.returncode == 0
    assert done.stdout.count("pass") == 3


def test_the_armed_pass_kills_the_process() -> None:
    done = run("round-commit=2,report-commit=1")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split("\n")[:2] == ["pass 0", "pass 1"]
    assert "FAILPOINT round-commit: killing the process" in done.stderr


@pytest.mark.parametrize("spec", ["round-commit", "round-commit=0", "nowhere=1", "dispatch-sent=x"])
def test_a_bad_spec_is_refused(spec: str) -> None:
    refused = run(spec)
    assert refused.returncode == 1  # on import, before any pass
    assert refused.stdout == ""
    assert f"ValueError: VGLOBAL_FAILPOINTS: {spec!r} is not POINT=N" in refused.stderr
