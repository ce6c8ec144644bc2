"""Volcano Global's DataDependency documents (`datadependency.volcano.sh/v1alpha1`), read and
checked as their CRD schemas check them, plus what the Global reads of them. Pure.

- `DataSource` (cluster-scoped): a data set and the clusters that hold it
  (`spec.locality.clusterNames`). Its size is `spec.attributes.size`, a Kubernetes quantity
  (`40Ti`); the rest of `spec.attributes` is kept as written.
- `DataSourceClaim` (namespaced): a workload's need for a data source, named as Volcano Global
  names it (`spec.system`, `spec.dataSourceType`, `spec.dataSourceName`); `spec.workload` is
  the Volcano Job or HyperJob that needs it. `spec.attributes.readGbps` (the Global's
  addition) is the rate at which the job may read the data remotely instead of staging it.

A claim binds to the DataSource whose `spec.system`, `spec.type` and `spec.name` are the
claim's `system`, `dataSourceType` and `dataSourceName`. `status` is the server's: a document's
status is ignored, as the API server ignores it on a resource with a status subresource.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

from volcano_global.jobspec.fields import Checker, child
from volcano_global.jobspec.object_metadata import (
    SERVER_METADATA,
    SUBDOMAIN,
    check_kind,
    named,
    string_map,
)
from volcano_global.jobspec.quantity import parse_quantity

GROUP = "datadependency.volcano.sh"
API_VERSION = f"{GROUP}/v1alpha1"
DATA_SOURCE = "DataSource"
DATA_SOURCE_CLAIM = "DataSourceClaim"
SIZE = "size"  # spec.attributes key of a DataSource's size
READ_GBPS = "readGbps"  # spec.attributes key of a claim's remote read rate
URI = "uri"  # spec.attributes key of where a DataSource's bytes are (a staging copy's source)
# The workloads a claim may name: what the Global runs.
WORKLOADS = {"Job": "batch.volcano.sh/v1alpha1", "HyperJob": "training.volcano.sh/v1alpha1"}
DEFAULT_NAMESPACE = "default"

_SOURCE_SPEC = frozenset({"attributes", "locality", "name", "reclaimPolicy", "system", "type"})
_SOURCE_REQUIRED = ("name", "system", "type")
_CLAIM_SPEC = frozenset({"attributes", "dataSourceName", "dataSourceType", "system", "workload"})
_WORKLOAD = frozenset({"apiVersion", "kind", "name", "namespace"})
_TOP = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class DataSourceDefinition:
    """A checked DataSource: what the Global reads of it, and the document as written (without
    status and server metadata) so that it reads back unchanged."""

    name: str
    system: str
    type: str
    source_name: str  # spec.name: the name claims ask for
    clusters: tuple[str, ...]  # spec.locality.clusterNames, in order, without repeats
    size_bytes: int | None  # spec.attributes.size; None: not said
    document: dict[str, Any] = field(compare=False)


@dataclass(frozen=True)
class WorkloadRef:
    api_version: str
    kind: str  # Job | HyperJob
    name: str


@dataclass(frozen=True)
class DataSourceClaimDefinition:
    name: str
    namespace: str
    system: str
    data_source_type: str
    data_source_name: str
    workload: WorkloadRef
    read_gbps: float | None  # spec.attributes.readGbps; None: must be staged
    document: dict[str, Any] = field(compare=False)


def read_data_source(doc: Any) -> DataSourceDefinition:
    """Check a DataSource document; raises `Invalid` naming every bad field."""
    check = Checker()
    name, _, metadata = _header(check, doc, DATA_SOURCE, namespaced=False)
    spec = check.mapping(doc, "spec", "", required=True) or {}
    check.unknown_fields(spec, _SOURCE_SPEC, "spec")
    strings = {key: check.string(spec, key, "spec", required=True) for key in _SOURCE_REQUIRED}
    check.string(spec, "reclaimPolicy", "spec")
    locality = check.mapping(spec, "locality", "spec", required=True) or {}
    check.unknown_fields(locality, frozenset({"clusterNames"}), "spec.locality")
    clusters = _cluster_names(check, locality)
    attributes = _strings(check, spec, "attributes", "spec")
    size = _size(check, attributes.get(SIZE))
    check.raise_if_any()
    assert name is not None
    return DataSourceDefinition(
        name=name,
        system=str(strings["system"]),
        type=str(strings["type"]),
        source_name=str(strings["name"]),
        clusters=clusters,
        size_bytes=size,
        document=_stored(doc, metadata),
    )


def read_data_source_claim(doc: Any) -> DataSourceClaimDefinition:
    """Check a DataSourceClaim document; raises `Invalid` naming every bad field. A claim
    without a namespace is in `default`, as kubectl puts it."""
    check = Checker()
    name, namespace, metadata = _header(check, doc, DATA_SOURCE_CLAIM, namespaced=True)
    spec = check.mapping(doc, "spec", "", required=True) or {}
    check.unknown_fields(spec, _CLAIM_SPEC, "spec")
    system = check.string(spec, "system", "spec", required=True)
    source_type = check.string(spec, "dataSourceType", "spec", required=True)
    source_name = check.string(spec, "dataSourceName", "spec", required=True)
    workload = _workload(check, spec, namespace)
    attributes = _strings(check, spec, "attributes", "spec")
    read_gbps = _gbps(check, attributes.get(READ_GBPS))
    check.raise_if_any()
    assert name is not None and workload is not None
    return DataSourceClaimDefinition(
        name=name,
        namespace=namespace,
        system=str(system),
        data_source_type=str(source_type),
        data_source_name=str(source_name),
        workload=workload,
        read_gbps=read_gbps,
        document=_stored(doc, metadata, namespace=namespace),
    )


def parse_size(value: Any) -> int:
    """A size in bytes from a quantity (`40Ti`, `1.5T`, `4096`), rounded up to a whole byte;
    raises ValueError with a short reason."""
    bytes_ = parse_quantity(value)
    return math.ceil(bytes_)


def _header(
    check: Checker, doc: Any, kind: str, *, namespaced: bool
) -> tuple[str | None, str, dict[str, Any]]:
    doc = check_kind(check, doc, kind=kind, api_version=API_VERSION)
    check.unknown_fields(doc, _TOP, "")
    metadata, name = named(check, doc)
    if name is not None and not (len(name) <= 253 and SUBDOMAIN.fullmatch(name)):
        check.fail("metadata.name", f"{name!r} is not a valid name (a DNS subdomain, <= 253)")
    _strings(check, metadata, "labels", "metadata")
    _strings(check, metadata, "annotations", "metadata")
    namespace = DEFAULT_NAMESPACE
    if namespaced:
        given = check.string(metadata, "namespace", "metadata")
        if given is not None and not (len(given) <= 63 and _LABEL.fullmatch(given)):
            check.fail("metadata.namespace", f"{given!r} is not a valid namespace (a DNS label)")
        namespace = given or DEFAULT_NAMESPACE
    return name, namespace, metadata


def _cluster_names(check: Checker, locality: dict[str, Any]) -> tuple[str, ...]:
    names = check.sequence(locality, "clusterNames", "spec.locality", required=False)
    if names is None:
        if "clusterNames" not in locality:
            check.fail("spec.locality.clusterNames", "required")
        return ()
    found: list[str] = []
    for index, value in enumerate(names):
        path = child("spec.locality.clusterNames", index)
        if not isinstance(value, str) or not value:
            check.fail(path, "must be a cluster name (a non-empty string)")
        elif len(value) > 63:
            check.fail(path, "must be at most 63 characters (a cluster name)")
        elif value not in found:
            found.append(value)
    return tuple(found)


def _size(check: Checker, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        check.fail(
            child("spec.attributes", SIZE), f"{exc} (a Kubernetes quantity of bytes, e.g. 40Ti)"
        )
        return None


def _gbps(check: Checker, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0 < number < 1e6:
        check.fail(
            child("spec.attributes", READ_GBPS), f"must be a number of Gbps > 0, got {value!r}"
        )
        return None
    return number


def _workload(check: Checker, spec: dict[str, Any], namespace: str) -> WorkloadRef | None:
    workload = check.mapping(spec, "workload", "spec", required=True)
    if workload is None:
        return None
    path = "spec.workload"
    check.unknown_fields(workload, _WORKLOAD, path)
    api_version = check.string(workload, "apiVersion", path, required=True)
    kind = check.string(workload, "kind", path, required=True)
    name = check.string(workload, "name", path, required=True)
    given = check.string(workload, "namespace", path)
    if kind is not None and kind not in WORKLOADS:
        check.fail(f"{path}.kind", f"must be Job or HyperJob (what the Global runs), got {kind!r}")
    elif kind is not None and api_version is not None and api_version != WORKLOADS[kind]:
        check.fail(f"{path}.apiVersion", f"must be {WORKLOADS[kind]} for kind {kind}")
    if given is not None and given != namespace:
        check.fail(
            f"{path}.namespace",
            f"must be the claim's namespace ({namespace!r}): a claim names a workload of its "
            "own namespace",
        )
    if api_version is None or kind is None or name is None:
        return None
    return WorkloadRef(api_version=api_version, kind=kind, name=name)


def _strings(check: Checker, obj: dict[str, Any], key: str, path: str) -> dict[str, str]:
    return string_map(check, obj, key, path, problem="must be a string (quote numbers)")


def _stored(
    doc: dict[str, Any], metadata: dict[str, Any], *, namespace: str | None = None
) -> dict[str, Any]:
    """The document as the Global keeps it: no status, no server metadata."""
    stored = {k: copy.deepcopy(v) for k, v in doc.items() if k != "status"}
    kept = {k: copy.deepcopy(v) for k, v in metadata.items() if k not in SERVER_METADATA}
    if namespace is None:
        kept.pop("namespace", None)
    else:
        kept["namespace"] = namespace
    stored["metadata"] = kept
    return stored
