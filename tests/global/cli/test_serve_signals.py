"""A SIGTERM that reaches `vglobal server` while it is still starting (the app being built,
before uvicorn takes the signals) stops it with exit code 0, as one while it serves does. Such a
signal was once only logged and the server ran on: a replica stopped during its start (a slow
one, on a loaded host) stayed up, deaf to the SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server_process import READY_WITHIN_S, STOP_WITHIN_S, ServerProcess
from volcano_global.cli.serve import keep_exit_code_on_signals


@pytest.fixture
def handlers_restored() -> Iterator[None]:
    """This process's SIGTERM and SIGINT handlers back as they were after the test."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@pytest.mark.usefixtures("handlers_restored")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_before_uvicorn_takes_the_signals_ends_the_process_with_code_0(
    signum: signal.Signals,
) -> None:
    keep_exit_code_on_signals()
    with pytest.raises(SystemExit) as ended:
        signal.raise_signal(signum)
    assert ended.value.code == 0


def test_a_server_sent_sigterm_as_it_starts_exits_with_code_0(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/starting.db", tmp_path)
    server.launch()
    assert server.proc is not None
    try:
        # Logged once the handler is in place, before the app (seconds of imports) is built.
        deadline = time.monotonic() + READY_WITHIN_S
        while "REST API on" not in server.log.read_text():
            assert server.proc.poll() is None, server.log.read_text()
            assert time.monotonic() < deadline, server.log.read_text()
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {STOP_WITHIN_S} s after SIGTERM:\n{server.log.read_text()}")
    finally:
        if server.proc.poll() is None:
            server.kill()
    assert code == 0, server.log.read_text()
