"""`vglobal plan --queue Q` writes its job in the queue's namespace (a queue's default, settings
`tenancy.default_namespaces`), not in `default`, which the Global would refuse."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from volcano_global.cli.main import app

PLAN = ["plan", "llama", "--tp", "8", "--dp", "2"]


def namespace_of(*args: str) -> str:
    result = CliRunner().invoke(app, [*PLAN, *args])
    assert result.exit_code == 0, result.output
    return str(yaml.safe_load(result.stdout)["metadata"]["namespace"])


def test_a_queue_names_the_namespace_unless_one_is_given() -> None:
    assert namespace_of("--queue", "llm") == "llm"
    assert namespace_of("--queue", "llm", "-n", "research") == "research"
    assert namespace_of() == "default"


def test_a_refused_option_is_named() -> None:
    from volcano_global.cli.client import CliError

    result = CliRunner().invoke(app, ["plan", "llama", "--dp", "0"])
    assert isinstance(result.exception, CliError)
    assert str(result.exception) == "--dp: Input should be greater than or equal to 1"


def test_every_plan_field_names_an_option_of_the_command() -> None:
    import typer.main

    from volcano_global.cli.plan import PLAN_OPTIONS
    from volcano_global.sdk import ParallelPlan

    command = typer.main.get_command(app).commands["plan"]  # type: ignore[attr-defined]
    flags = {flag for param in command.params for flag in param.opts}
    assert set(PLAN_OPTIONS) <= set(ParallelPlan.model_fields)
    assert set(PLAN_OPTIONS.values()) <= flags
