"""Rendering the Kustomize overlays in deploy/ the way an operator does (`kubectl kustomize`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OVERLAYS = sorted(p for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").exists())


def render(overlay: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail(
            "kubectl is needed to render deploy/ (scripts/ensure-kubectl.sh installs it)",
            pytrace=False,
        )
    out = subprocess.run(
        [kubectl, "kustomize", str(overlay)], check=True, capture_output=True, text=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
