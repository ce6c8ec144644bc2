"""Job `plugins` (and a HyperJob's) as Volcano's CRDs and webhook take them: a map from a plugin's
name to its arguments, a list of strings.

A Volcano Job's plugins must be ones Volcano's job controller has (its webhook refuses "unable to
find job plugin"), and the `mpi` plugin's master task (`--master`, default `master`) must be one
of the Job's tasks. A HyperJob's `plugins` are reserved in Volcano (no controller acts on them):
any name is accepted and kept with the document.
"""

from __future__ import annotations

from typing import Any

from volcano_global.jobspec.fields import Checker, child

# pkg/controllers/job/plugins/factory.go (Volcano ed72c7c)
JOB_PLUGINS = ("ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray")
MPI_DEFAULT_MASTER = "master"


def read_plugins(
    owner: dict[str, Any], path: str, check: Checker, *, known: tuple[str, ...] | None
) -> dict[str, list[str]]:
    """The plugins map, each bad entry reported; `known`: the names allowed (None: any)."""
    raw = check.mapping(owner, "plugins", path)
    if raw is None:
        return {}
    ppath = child(path, "plugins")
    plugins: dict[str, list[str]] = {}
    for name, args in raw.items():
        here = child(ppath, str(name))
        if known is not None and name not in known:
            check.fail(here, f"unknown job plugin {name!r}; Volcano has {', '.join(known)}")
            continue
        if args is None:
            args = []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            check.fail(here, "must be a list of strings (the plugin's arguments)")
            continue
        plugins[str(name)] = args
    return plugins


def mpi_master(args: list[str]) -> str:
    """The master task the `mpi` plugin's arguments name, parsed as Go's flag package does
    (`--master=x`, `-master=x`, `--master x`)."""
    master = MPI_DEFAULT_MASTER
    it = iter(args)
    for arg in it:
        flag, eq, value = arg.lstrip("-").partition("=")
        if arg.startswith("-") and flag == "master":
            master = value if eq else next(it, master)
    return master


def check_mpi_master(
    plugins: dict[str, list[str]], task_names: list[str], path: str, check: Checker
) -> None:
    if "mpi" not in plugins:
        return
    master = mpi_master(plugins["mpi"])
    if master not in task_names:
        check.fail(
            child(child(path, "plugins"), "mpi"),
            f"the mpi plugin's master task {master!r} is not a task of the job "
            f"(tasks: {', '.join(task_names) or 'none'})",
        )
