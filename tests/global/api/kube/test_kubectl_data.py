"""The real kubectl against a real `vglobal server` (https, one server for the module) with
Volcano Global's DataDependency kinds: `kubectl apply -f` of a DataSource and a
DataSourceClaim unchanged (created, unchanged, configured), `kubectl get datasources` and
`datasourceclaims` as tables and YAML, the same objects through the REST API, a bad size
refused naming the field, and delete."""

from __future__ import annotations

import importlib

import yaml

from tests.data_documents import data_source, data_source_claim

# The kubectl fixture of test_kubectl.py (its own server for this module); `tests.global`
# cannot be named in an import statement (`global` is a keyword).
_kubectl = importlib.import_module("tests.global.api.kube.test_kubectl")
Kubectl = _kubectl.Kubectl
kubectl = _kubectl.kubectl
pytestmark = _kubectl.pytestmark


def test_api_resources_lists_the_data_kinds(kubectl: Kubectl) -> None:
    listed = kubectl("api-resources", "--api-group=datadependency.volcano.sh")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:]}
    assert rows["datasources"] == ["datadependency.volcano.sh/v1alpha1", "false", "DataSource"]
    assert rows["datasourceclaims"] == [
        "datadependency.volcano.sh/v1alpha1",
        "true",
        "DataSourceClaim",
    ]


def test_apply_and_get_a_data_source(kubectl: Kubectl) -> None:
    document = data_source("corpus-k", clusters=("gpu-west",))
    first = kubectl.apply(document)
    assert first.stdout.strip() == "datasource.datadependency.volcano.sh/corpus-k created", (
        first.stderr
    )
    again = kubectl.apply(document)
    assert again.stdout.strip() == "datasource.datadependency.volcano.sh/corpus-k unchanged"
    moved = data_source("corpus-k", clusters=("gpu-west", "gpu-east"), size="41Ti")
    changed = kubectl.apply(moved)
    assert changed.stdout.strip() == "datasource.datadependency.volcano.sh/corpus-k configured"

    header, row = kubectl("get", "datasources", "corpus-k").stdout.splitlines()
    assert header.split() == ["NAME", "SIZE", "CLUSTERS", "CLAIMS", "AGE"]
    assert row.split()[:4] == ["corpus-k", "41Ti", "gpu-west,gpu-east", "0"]
    shown = yaml.safe_load(kubectl("get", "datasource", "corpus-k", "-o", "yaml").stdout)
    assert shown["spec"] == moved["spec"]
    rest = kubectl.api.get("/api/v1/datasources/corpus-k").json()
    assert (rest["sizeBytes"], rest["clusters"]) == (41 * 2**40, ["gpu-west", "gpu-east"])

    deleted = kubectl("delete", "datasource", "corpus-k")
    assert deleted.returncode == 0, deleted.stderr
    assert kubectl.api.get("/api/v1/datasources/corpus-k").status_code == 404


def test_a_bad_size_is_refused_naming_the_field(kubectl: Kubectl) -> None:
    refused = kubectl.apply(data_source("corpus-bad", size="forty"))
    assert refused.returncode != 0
    assert "spec.attributes.size" in refused.stderr, refused.stderr


def test_apply_a_claim_and_see_it_bound(kubectl: Kubectl) -> None:
    assert kubectl.apply(data_source("corpus-c")).returncode == 0
    claim = data_source_claim("reads-corpus", source="corpus-c", workload="train-c")
    created = kubectl.apply(claim)
    assert created.stdout.strip() == (
        "datasourceclaim.datadependency.volcano.sh/reads-corpus created"
    ), created.stderr
    header, row = kubectl("get", "datasourceclaims").stdout.splitlines()
    assert header.split() == ["NAME", "DATASOURCE", "WORKLOAD", "STATUS", "AGE"]
    assert row.split()[:4] == ["reads-corpus", "corpus-c", "Job/train-c", "Bound"]
    listed = kubectl("get", "datasources", "corpus-c", "-o", "yaml").stdout
    assert yaml.safe_load(listed)["status"]["boundClaims"] == 1
    assert kubectl("delete", "datasourceclaim", "reads-corpus").returncode == 0
    assert kubectl.api.get("/api/v1/datasourceclaims").json()["items"] == []
