"""Volcano Global's DataDependency documents with realistic defaults, for the tests."""

from __future__ import annotations

from typing import Any

API_VERSION = "datadependency.volcano.sh/v1alpha1"


def data_source(
    name: str = "corpus-v3", *, clusters: tuple[str, ...] = ("gpu-west",), size: str = "40Ti"
) -> dict[str, Any]:
    """A DataSource as Volcano Global publishes one (its deploy guide's shape)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DataSource",
        "metadata": {"name": name},
        "spec": {
            "system": "s3",
            "type": "dataset",
            "name": name,
            "locality": {"clusterNames": list(clusters)},
            "attributes": {"size": size},
            "reclaimPolicy": "Retain",
        },
    }


def data_source_claim(
    name: str = "train-corpus",
    *,
    namespace: str = "ml",
    source: str = "corpus-v3",
    workload: str = "train",
    kind: str = "Job",
    **attributes: str,
) -> dict[str, Any]:
    group = "batch.volcano.sh/v1alpha1" if kind == "Job" else "training.volcano.sh/v1alpha1"
    spec: dict[str, Any] = {
        "system": "s3",
        "dataSourceType": "dataset",
        "dataSourceName": source,
        "workload": {"apiVersion": group, "kind": kind, "name": workload},
    }
    if attributes:
        spec["attributes"] = attributes
    return {
        "apiVersion": API_VERSION,
        "kind": "DataSourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
