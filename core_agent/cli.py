"""`vglobal agent`: run the agent of one member cluster."""

from __future__ import annotations

import asyncio
import logging
import signal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from core_agent.inventory import DEFAULT_COALESCE_S

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    import grpc

    from core_agent.simulated.cluster import SimulatedCluster
    from core_agent.sources import InventorySource


class SourceKind(StrEnum):
    SIMULATED = "simulated"
    KUBERNETES = "kubernetes"


def _existing_file(envvar: str, help: str) -> Any:
    """An option naming a file that must exist, also read from the environment."""
    return typer.Option(envvar=envvar, exists=True, dir_okay=False, help=help)


# The connection to the Global.
ClusterOption = Annotated[str, typer.Option(help="This member cluster's name (as registered)")]
TokenOption = Annotated[
    str,
    typer.Option(
        envvar="VGLOBAL_AGENT_TOKEN",
        help="The cluster's agent token [env: VGLOBAL_AGENT_TOKEN]",
    ),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        envvar="VGLOBAL_AGENT_TOKEN_FILE",
        help="A file holding the agent token, read again before each connection (a "
        "rotated token mounted from a Secret is picked up without a restart) "
        "[env: VGLOBAL_AGENT_TOKEN_FILE]",
    ),
]
GlobalOption = Annotated[str, typer.Option("--global", help="The Global's gRPC address HOST:PORT")]
CaFileOption = Annotated[
    Path | None,
    _existing_file(
        "VGLOBAL_AGENT_CA_FILE", "TLS: CA bundle the Global's certificate is checked against"
    ),
]
CertFileOption = Annotated[
    Path | None,
    _existing_file("VGLOBAL_AGENT_CERT_FILE", "Mutual TLS: this agent's client certificate"),
]
KeyFileOption = Annotated[
    Path | None,
    _existing_file("VGLOBAL_AGENT_KEY_FILE", "Mutual TLS: the client certificate's key"),
]
CoalesceOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        envvar="VGLOBAL_AGENT_COALESCE_S",
        help="Inventory changes within this window go to the Global as one delta (each "
        "delta costs the Global a transaction, whatever its size)",
    ),
]

# Where the inventory comes from, and a simulated cluster's shape.
SourceOption = Annotated[SourceKind, typer.Option(help="Where the inventory comes from")]
SpecOption = Annotated[
    Path | None,
    typer.Option(
        help="Simulated cluster spec (YAML: nodeGroups, topology)", exists=True, dir_okay=False
    ),
]
LingjunBlockOption = Annotated[
    int | None, typer.Option(help="Simulate this aggregation block of the real Lingjun fabric")
]
GpuModelOption = Annotated[str, typer.Option(help="GPU model of a Lingjun-built simulated cluster")]
TimeScaleOption = Annotated[
    float,
    typer.Option(
        min=0.0001, help="Simulated: wall seconds per job second (0.01: 1 h runs in 36 s)"
    ),
]

# A Kubernetes cluster.
KubeconfigOption = Annotated[
    Path | None,
    typer.Option(help="Kubernetes: kubeconfig file (default: in-cluster, then ~/.kube)"),
]
KubeHostOption = Annotated[
    str | None, typer.Option(help="Kubernetes: API server URL without credentials (emulators)")
]
GlobalApiOption = Annotated[
    str,
    typer.Option(
        envvar="VGLOBAL_API",
        help="Kubernetes: the Global's REST URL as the training pods reach it (for their "
        "measurement reports) [env: VGLOBAL_API]",
    ),
]
StagingConfigOption = Annotated[
    Path | None,
    _existing_file(
        "VGLOBAL_AGENT_STAGING_CONFIG",
        "Kubernetes: the copier a share's staging Job runs (YAML: image, command, args, "
        "secret, volume_claim, mount_path, timeout_s; docs/staging.md). Default: s5cmd",
    ),
]
TierLabelOption = Annotated[
    list[str] | None,
    typer.Option(help="Kubernetes without HyperNodes: node label of tier 1, 2, ... (repeat)"),
]


def agent(
    cluster: ClusterOption,
    token: TokenOption = "",
    token_file: TokenFileOption = None,
    global_: GlobalOption = "127.0.0.1:8081",
    source: SourceOption = SourceKind.SIMULATED,
    spec: SpecOption = None,
    lingjun_block: LingjunBlockOption = None,
    gpu_model: GpuModelOption = "H800",
    time_scale: TimeScaleOption = 1.0,
    kubeconfig: KubeconfigOption = None,
    kube_host: KubeHostOption = None,
    global_api: GlobalApiOption = "",
    ca_file: CaFileOption = None,
    cert_file: CertFileOption = None,
    key_file: KeyFileOption = None,
    staging_config: StagingConfigOption = None,
    tier_label: TierLabelOption = None,
    coalesce_s: CoalesceOption = DEFAULT_COALESCE_S,
) -> None:
    """Run the agent of one member cluster: stream its inventory to the Global and run the
    shares it is assigned."""
    # The agent's own imports (gRPC, the sources, kubernetes-asyncio) are made when it runs:
    # `vglobal` registers this command for every other command too.
    from core_agent.client import AgentClient

    if not token and token_file is None:
        raise typer.BadParameter("give --token or --token-file", param_hint="--token")

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    async def main() -> None:
        stop = _stop_on_signals()
        inventory_source: InventorySource
        if source is SourceKind.KUBERNETES:
            inventory_source = await _kubernetes(
                kubeconfig, kube_host, tier_label or [], global_api, staging_config
            )
        else:
            inventory_source = _simulated(cluster, spec, lingjun_block, gpu_model, time_scale)
        client = AgentClient(
            cluster=cluster,
            target=global_,
            token=token,
            token_file=token_file,
            source=inventory_source,
            coalesce_s=coalesce_s,
            credentials=tls_credentials(ca_file, cert_file, key_file),
        )
        await client.run(stop=stop)

    tls = ca_file is not None or cert_file is not None
    _run_or_exit(main, target=global_, tls=tls, cluster=cluster)


def _run_or_exit(
    main: Callable[[], Coroutine[None, None, None]], *, target: str, tls: bool, cluster: str
) -> None:
    """Run the agent's loop; a TLS mismatch or the Global's refusal ends it with one line."""
    import grpc
    import uvloop

    from core_agent.preflight import TlsMismatch, refusal_line, tls_mismatch

    mismatch = tls_mismatch(target, tls=tls)
    if mismatch:
        raise SystemExit(f"error: {mismatch}")
    try:
        uvloop.run(main())  # the agent is CPU-bound on messages; uvloop's loop costs less per one
    except grpc.aio.AioRpcError as exc:
        raise SystemExit(f"error: {refusal_line(exc, cluster)}") from None
    except TlsMismatch as exc:
        raise SystemExit(f"error: {exc}") from None


def _stop_on_signals() -> asyncio.Event:
    """An event SIGINT or SIGTERM sets (on the running loop): the agent's signal to stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _kubernetes(
    kubeconfig: Path | None,
    host: str | None,
    tier_labels: list[str],
    global_api: str,
    staging_config: Path | None,
) -> InventorySource:
    # Imported here: kubernetes-asyncio takes seconds to import, which every other `vglobal`
    # command (and a simulated agent) would otherwise pay.
    from core_agent.kubernetes.adapter import KubeApi, api_client
    from core_agent.kubernetes.source import KubernetesSource
    from core_agent.kubernetes.staging import StagingConfig

    api = await api_client(kubeconfig=str(kubeconfig) if kubeconfig else None, host=host)
    return KubernetesSource(
        KubeApi(api),
        tier_labels=tier_labels,
        global_api=global_api,
        staging=StagingConfig.from_yaml(staging_config) if staging_config else None,
    )


def _simulated(
    cluster: str, spec: Path | None, block: int | None, gpu_model: str, time_scale: float
) -> SimulatedCluster:
    from core_agent.simulated.cluster import SimulatedCluster

    if spec is not None:
        simulated = SimulatedCluster.from_yaml(cluster, spec)
    elif block is not None:
        simulated = SimulatedCluster.from_lingjun(cluster, block=block, gpu_model=gpu_model)
    else:
        raise typer.BadParameter(
            "a simulated cluster needs --spec FILE or --lingjun-block N", param_hint="--spec"
        )
    simulated.time_scale = time_scale
    return simulated


def tls_credentials(
    ca_file: Path | None, cert_file: Path | None, key_file: Path | None
) -> grpc.ChannelCredentials | None:
    """Channel credentials from PEM files: none of them means a plain channel."""
    import grpc

    if ca_file is None and cert_file is None:
        return None
    if (cert_file is None) != (key_file is None):
        raise typer.BadParameter("give both --cert-file and --key-file", param_hint="--cert-file")
    return grpc.ssl_channel_credentials(
        root_certificates=ca_file.read_bytes() if ca_file else None,
        private_key=key_file.read_bytes() if key_file else None,
        certificate_chain=cert_file.read_bytes() if cert_file else None,
    )
