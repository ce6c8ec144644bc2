"""`-o FORMAT` is taken anywhere on the line, as kubectl users type it."""

from __future__ import annotations

from volcano_global.cli.argv import hoist_output


def test_output_flags_move_to_the_front() -> None:
    assert hoist_output(["get", "ml/train", "-o", "yaml"]) == ["-o", "yaml", "get", "ml/train"]
    assert hoist_output(["jobs", "-ojson"]) == ["-ojson", "jobs"]
    assert hoist_output(["cancel", "a", "--output=json"]) == ["--output=json", "cancel", "a"]


def test_nothing_after_a_double_dash_moves() -> None:
    args = ["submit", "-f", "x.yaml", "--", "-o", "yaml"]
    assert hoist_output(args) == args


def test_the_command_list_joins_a_docstrings_lines() -> None:
    # Rich's markup mode kept each docstring line break, cutting sentences mid-line.
    from typer.testing import CliRunner

    from volcano_global.cli.main import app

    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert "on a fresh SQLite database: three simulated clusters with real topologies" in (
        listed.stdout
    )
