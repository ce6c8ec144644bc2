"""How `vglobal server`'s settings become uvicorn's: the worker health check's timeout reaches
uvicorn's Config, and a timeout that is not positive is refused naming the setting. The module
that starts the server does not import the app (with workers > 1 the supervisor never builds
one)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import uvicorn
from typer.testing import CliRunner

from volcano_global.cli.main import app
from volcano_global.cli.serve import run_server, uvicorn_options
from volcano_global.settings import Settings

POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/unused"


def config_of(settings: Settings) -> uvicorn.Config:
    """uvicorn's own Config, built from the arguments `run_server` gives `uvicorn.run`."""
    return uvicorn.Config("volcano_global.cli.serve:worker_app", **uvicorn_options(settings))


def test_the_worker_healthcheck_timeout_reaches_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(database_url=POSTGRES, workers=2)
    assert config_of(settings).timeout_worker_healthcheck == 5  # uvicorn's own default

    monkeypatch.setenv("VGLOBAL_WORKER_HEALTHCHECK_TIMEOUT_S", "45")
    config = config_of(Settings(database_url=POSTGRES, workers=2))
    assert config.timeout_worker_healthcheck == 45
    assert config.workers == 2


@pytest.mark.parametrize("timeout", [0, -1])
def test_a_timeout_that_is_not_positive_is_refused_naming_it(timeout: float) -> None:
    with pytest.raises(SystemExit) as refused:
        run_server(
            host=None,
            port=None,
            grpc_port=None,
            database_url=POSTGRES,
            workers=2,
            worker_healthcheck_timeout_s=timeout,
        )
    assert str(refused.value) == (
        "error: worker_healthcheck_timeout_s: Input should be greater than 0"
    )


def test_a_bad_timeout_in_the_environment_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VGLOBAL_WORKER_HEALTHCHECK_TIMEOUT_S", "0")
    with pytest.raises(SystemExit, match=r"^error: worker_healthcheck_timeout_s: "):
        run_server(host=None, port=None, grpc_port=None, database_url=POSTGRES)


def test_the_command_line_option_is_the_setting() -> None:
    args = ["server", "--database-url", POSTGRES, "--worker-healthcheck-timeout-s", "-5"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 1
    assert "error: worker_healthcheck_timeout_s: Input should be greater than 0" in done.output


def test_the_server_module_leaves_the_app_to_the_workers() -> None:
    # A fresh interpreter: this one has imported the app through other tests.
    probe = "import sys, volcano_global.cli.serve; print('volcano_global.app' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
