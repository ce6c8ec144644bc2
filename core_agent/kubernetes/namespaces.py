"""Where the agent refuses to create member jobs, whatever the Global sends: the system
namespaces (`kube-*`) and its own. Defence in depth: the Global refuses such jobs at
submission (jobspec/tenancy.py) and deploy/ grants the agent writes only in the namespaces it
serves."""

from __future__ import annotations

import os
from pathlib import Path

from volcano_global.rpc.copies import NAMESPACE_REFUSED

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "volcano-global-agent"  # deploy/base/agent's


def own_namespace() -> str:
    """POD_NAMESPACE (deploy/ sets it from the downward API), else the mounted service
    account's namespace, else deploy/'s."""
    if found := os.environ.get("POD_NAMESPACE"):
        return found
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def namespace_refusal(namespace: str, own: str) -> str | None:
    """Why a share may not run in `namespace` (None: it may). It begins with
    `NAMESPACE_REFUSED` (a copy refused so fails with cause `NAMESPACE_REFUSED`: the job's
    choice, not the cluster's fault; a Global reads the words of an older agent's)."""
    if namespace.startswith("kube-"):
        return f"{NAMESPACE_REFUSED} the system namespace {namespace!r} (kube-*)"
    if namespace == own:
        return f"{NAMESPACE_REFUSED} its own namespace {namespace!r}"
    return None
