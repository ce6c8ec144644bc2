"""`vglobal agent`: run the agent of one member cluster."""

from __future__ import annotations

import asyncio
import logging
import signal
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from core_agent.client import AgentClient
from core_agent.simulated.cluster import SimulatedCluster


class SourceKind(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


def agent(
    cluster: Annotated[str, typer.Option(help="This member cluster's name (as registered)")],
    token: Annotated[
        str,
        typer.Option(
            envvar="VGLOBAL_AGENT_TOKEN",
            help="The cluster's agent token [env: VGLOBAL_AGENT_TOKEN]",
        ),
    ],
    global_: Annotated[
        str, typer.Option("--global", help="The Global's gRPC address HOST:PORT")
    ] = "127.0.0.1:8081",
    source: Annotated[
        SourceKind, typer.Option(help="Where the inventory comes from")
    ] = SourceKind.SIMULATED,
    spec: Annotated[
        Path | None, typer.Option(help="Simulated cluster spec (YAML: nodeGroups, topology)")
    ] = None,
    lingjun_block: Annotated[
        int | None, typer.Option(help="Simulate this aggregation block of the real Lingjun fabric")
    ] = None,
    gpu_model: Annotated[
        str, typer.Option(help="GPU model of a Lingjun-built simulated cluster")
    ] = "H800",
) -> None:
    """Run the agent of one member cluster: stream its inventory to the Global."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if source is SourceKind.KUBERNETES:
        raise typer.BadParameter(
            "the kubernetes source is not built yet; use --source simulated", param_hint="--source"
        )
    if spec is not None:
        inventory_source = SimulatedCluster.from_yaml(cluster, spec)
    elif lingjun_block is not None:
        inventory_source = SimulatedCluster.from_lingjun(
            cluster, block=lingjun_block, gpu_model=gpu_model
        )
    else:
        raise typer.BadParameter(
            "a simulated cluster needs --spec FILE or --lingjun-block N", param_hint="--spec"
        )
    client = AgentClient(cluster=cluster, target=global_, token=token, source=inventory_source)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await client.run(stop=stop)

    asyncio.run(main())
