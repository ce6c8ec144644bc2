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
