"""Command-line habits kubectl users bring: `-o json` anywhere on the line (the format is an
option of `vglobal` itself, so Click would refuse it after the subcommand)."""

from __future__ import annotations

from collections.abc import Sequence

OUTPUT_FLAGS = ("-o", "--output")


def hoist_output(args: Sequence[str]) -> list[str]:
    """The arguments with every `-o FORMAT`, `-oFORMAT` and `--output[=]FORMAT` moved to the
    front, where `vglobal`'s own options go (nothing after `--` is touched; the last one
    given wins, as Click's does)."""
    rest = list(args)
    end = rest.index("--") if "--" in rest else len(rest)
    moved: list[str] = []
    kept: list[str] = []
    index = 0
    while index < end:
        arg = rest[index]
        if arg in OUTPUT_FLAGS and index + 1 < end:
            moved += [arg, rest[index + 1]]
            index += 2
            continue
        if arg.startswith("--output=") or (arg.startswith("-o") and len(arg) > 2 and arg[2] != "-"):
            moved.append(arg)
        else:
            kept.append(arg)
        index += 1
    return moved + kept + rest[end:]
