"""`vglobal apply -f` of DataSources and DataSourceClaims and `vglobal get datasources` /
`datasourceclaims` against a real `vglobal server` process (SQLite and Postgres)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.data_documents import data_source, data_source_claim
from tests.server_process import ServerProcess


def test_apply_then_get_the_data_kinds(server: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "data.yaml"
    documents = [
        data_source("corpus-v3", clusters=("gpu-west", "gpu-central"), size="40Ti"),
        data_source_claim("reads-corpus", workload="pretrain", readGbps="50"),
        data_source("broken", size="forty"),
    ]
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    first = server.cli("apply", "-f", str(path))
    assert first.returncode == 1, first.stderr
    assert first.stdout.splitlines() == [
        "datasource.datadependency.volcano.sh/corpus-v3 created",
        "datasourceclaim.datadependency.volcano.sh/ml/reads-corpus created",
    ]
    assert "spec.attributes.size: invalid quantity 'forty'" in first.stderr

    again = server.cli("apply", "-f", str(path))
    assert again.stdout.splitlines()[:2] == [
        "datasource.datadependency.volcano.sh/corpus-v3 unchanged",
        "datasourceclaim.datadependency.volcano.sh/ml/reads-corpus unchanged",
    ]

    sources = server.cli("get", "datasources")
    assert sources.returncode == 0, sources.stderr
    header, row = sources.stdout.splitlines()
    assert header.split() == ["NAME", "SIZE", "CLUSTERS", "CLAIMS", "SYSTEM/TYPE"]
    assert row.split() == ["corpus-v3", "40", "TiB", "gpu-west,gpu-central", "1", "s3/dataset"]

    claims = server.cli("get", "datasourceclaims", "-n", "ml")
    assert claims.returncode == 0, claims.stderr
    header, row = claims.stdout.splitlines()
    assert header.split() == [
        "NAMESPACE",
        "NAME",
        "DATASOURCE",
        "WORKLOAD",
        "BOUND",
        "TO",
        "READ",
        "GBPS",
    ]
    assert row.split() == ["ml", "reads-corpus", "corpus-v3", "Job/pretrain", "corpus-v3", "50"]
    assert server.cli("get", "datasourceclaims", "-n", "other").stdout.splitlines()[1:] == []
