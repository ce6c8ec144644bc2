"""`vglobal kubeconfig`: a kubeconfig for kubectl against the Global's Kubernetes-compatible
API (`<server>/k8s`), with the current server and bearer token."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from volcano_global.cli.client import CliError, resolve_connection
from volcano_global.cli.context import options

KUBE_PREFIX = "/k8s"


def build_kubeconfig(
    server: str, token: str | None, *, name: str, namespace: str, ca_file: Path | None
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server.rstrip("/") + KUBE_PREFIX}
    if ca_file is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_file.read_bytes()).decode()
    user: dict[str, Any] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
    }


def kubeconfig(
    ctx: typer.Context,
    name: Annotated[str, typer.Option(help="Name of the cluster, user and context")] = (
        "volcano-global"
    ),
    namespace: Annotated[str, typer.Option("-n", "--namespace")] = "default",
) -> None:
    """Print a kubeconfig for kubectl against this Global (`KUBECONFIG=<file> kubectl get
    vcjob`). The CA of an https Global with a private CA is taken from VGLOBAL_CA_FILE."""
    opts = options(ctx)
    connection = resolve_connection(opts.server, opts.token, opts.config)
    ca = os.environ.get("VGLOBAL_CA_FILE")
    ca_file = Path(ca) if ca else None
    if ca_file is not None and not ca_file.is_file():
        raise CliError(f"VGLOBAL_CA_FILE {ca_file} not found")
    if connection.token is None:
        raise CliError("no token: pass --token or set VGLOBAL_TOKEN (kubectl needs one)")
    if connection.server.startswith("http://"):
        # client-go's kubeconfig loading drops the user's credentials on a plain-http server.
        print(
            "warning: kubectl sends the token only over https; serve the Global with TLS "
            "(VGLOBAL_TLS__CERT_FILE) for kubectl",
            file=sys.stderr,
        )
    config = build_kubeconfig(
        connection.server, connection.token, name=name, namespace=namespace, ca_file=ca_file
    )
    sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
