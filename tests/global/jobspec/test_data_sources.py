"""The DataSource and DataSourceClaim parser (pure): Volcano Global's documents read unchanged,
sizes as bytes, status and server metadata not kept, every error naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.data_documents import data_source, data_source_claim
from volcano_global.errors import Invalid
from volcano_global.jobspec.data_sources import (
    parse_size,
    read_data_source,
    read_data_source_claim,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("40Ti", 40 * 2**40), ("1.5T", 1_500_000_000_000), ("4096", 4096), ("1.5", 2), (7, 7)],
)
def test_sizes_are_bytes_rounded_up(text: Any, expected: int) -> None:
    assert parse_size(text) == expected


def test_a_data_source_reads_as_published() -> None:
    document = data_source(clusters=("gpu-west", "gpu-central", "gpu-west"))
    document["status"] = {"boundClaims": 9}
    document["metadata"] |= {"uid": "x", "resourceVersion": "7", "labels": {"tier": "hot"}}
    source = read_data_source(document)
    assert (source.name, source.system, source.type, source.source_name) == (
        "corpus-v3",
        "s3",
        "dataset",
        "corpus-v3",
    )
    assert source.clusters == ("gpu-west", "gpu-central")  # in order, once each
    assert source.size_bytes == 40 * 2**40
    assert "status" not in source.document
    assert source.document["metadata"] == {"name": "corpus-v3", "labels": {"tier": "hot"}}
    assert source.document["spec"] == document["spec"]


def test_a_data_source_without_a_size_has_none() -> None:
    document = data_source()
    del document["spec"]["attributes"]
    assert read_data_source(document).size_bytes is None


def _fields(exc: pytest.ExceptionInfo[Invalid]) -> list[str]:
    return [e.field for e in exc.value.errors]


def test_every_bad_field_is_named_at_once() -> None:
    document = data_source()
    document["metadata"]["name"] = "Corpus_V3"
    document["spec"] = {
        "system": 3,
        "locality": {"clusterNames": "gpu-west"},
        "attributes": {"size": "40 TB", "tier": 1},
        "mirror": True,
    }
    with pytest.raises(Invalid) as exc:
        read_data_source(document)
    assert sorted(_fields(exc)) == sorted(
        [
            "metadata.name",
            "spec.mirror",
            "spec.system",
            "spec.type",
            "spec.name",
            "spec.locality.clusterNames",
            "spec.attributes.tier",
            "spec.attributes.size",
        ]
    )


def test_the_kind_and_version_must_be_volcano_globals() -> None:
    document = data_source()
    document["apiVersion"] = "datadependency.volcano.sh/v1"
    with pytest.raises(Invalid) as exc:
        read_data_source(document)
    assert _fields(exc) == ["apiVersion"]
    with pytest.raises(Invalid) as exc:
        read_data_source_claim(data_source())
    assert _fields(exc) == ["kind"]


def test_a_claim_reads_its_workload_and_read_rate() -> None:
    document = data_source_claim(kind="HyperJob", readGbps="12.5")
    del document["metadata"]["namespace"]
    claim = read_data_source_claim(document)
    assert (claim.namespace, claim.workload.kind, claim.workload.name) == (
        "default",
        "HyperJob",
        "train",
    )
    assert claim.read_gbps == 12.5
    assert claim.document["metadata"]["namespace"] == "default"


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}, "spec.workload.name"),
        (
            {"apiVersion": "training.volcano.sh/v1alpha1", "kind": "Job", "name": "w"},
            "spec.workload.apiVersion",
        ),
        (
            {"apiVersion": "kubeflow.org/v2alpha1", "kind": "TrainJob", "name": "w"},
            "spec.workload.kind",
        ),
    ],
)
def test_a_claim_names_a_volcano_job_or_hyperjob(workload: dict[str, str], field: str) -> None:
    document = data_source_claim()
    document["spec"]["workload"] = workload
    with pytest.raises(Invalid) as exc:
        read_data_source_claim(document)
    assert _fields(exc) == [field]


@pytest.mark.parametrize("rate", ["0", "-3", "nan", "inf", "fast"])
def test_a_read_rate_must_be_a_positive_number(rate: str) -> None:
    with pytest.raises(Invalid) as exc:
        read_data_source_claim(data_source_claim(readGbps=rate))
    assert _fields(exc) == ["spec.attributes.readGbps"]
