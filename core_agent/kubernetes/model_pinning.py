"""A share's GPU model pinned on its pods: a job that names no model is placed by the Global on
one model of a cluster that has several (its books count the share's GPUs against that model),
so its GPU pods must run on that model's nodes, not wherever Volcano finds room.

The Global names models canonically (`H100`); nodes carry their vendor's label
(`nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3`), and two nodes of one model may spell it
differently. The pods get a required node affinity on the label values of this cluster's nodes
whose model is the share's, ANDed with any affinity their template already requires."""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from volcano_global.jobspec.accelerators import model_labels, node_model, resource_model
from volcano_global.jobspec.fields import Checker
from volcano_global.jobspec.pods import gpu_model_from_template, pod_resources

log = logging.getLogger(__name__)

Requirement = dict[str, list[str]]  # model label -> the values that name the model


def label_values(nodes: Iterable[dict[str, Any]]) -> dict[str, Requirement]:
    """Each GPU model of this cluster's nodes (canonical; '' for nodes that name none) with
    the label values by which its nodes say they hold it, in one pass over the nodes."""
    values: defaultdict[str, defaultdict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        status = node.get("status") or {}
        for resource in status.get("allocatable") or status.get("capacity") or {}:
            keys = model_labels(resource)
            if not keys and resource_model(resource) is None:
                continue  # not an accelerator
            found = values[node_model(resource, labels)]
            # the label `node_model` read (the first present), if any
            key = next((k for k in keys if isinstance(labels.get(k), str) and labels[k]), None)
            if key is not None:
                found[key].add(labels[key])
    return {
        model: {key: sorted(found) for key, found in sorted(by_key.items())}
        for model, by_key in values.items()
    }


def pin_model(documents: list[dict[str, Any]], model: str, requirement: Requirement) -> int:
    """Require `requirement` of every GPU task of the Volcano Jobs `documents` whose template
    pins no model; the tasks pinned. A model its resource implies (an Ascend chip) needs none."""
    pinned = 0
    for document in documents:
        for task in (document.get("spec") or {}).get("tasks") or []:
            template = task.get("template")
            if isinstance(template, dict) and _needs_pin(template):
                _require(template, requirement)
                pinned += 1
    if pinned:
        log.info("GPU pods of %d task(s) pinned to %s by %s", pinned, model, requirement)
    return pinned


def _needs_pin(template: dict[str, Any]) -> bool:
    resources = pod_resources(template, "template", Checker())
    resource = resources.gpu_resource
    return (
        resources.gpus > 0
        and resource is not None
        and resource_model(resource) is None
        and gpu_model_from_template(template, resources) is None
    )


def _require(template: dict[str, Any], requirement: Requirement) -> None:
    """AND the requirement (any of its labels' values: one term each) into the template's
    required node affinity, whose terms are ORed."""
    spec = template.setdefault("spec", {})
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    ours = [{"key": key, "operator": "In", "values": values} for key, values in requirement.items()]
    required["nodeSelectorTerms"] = [
        {**copy.deepcopy(term), "matchExpressions": [*term.get("matchExpressions", []), expr]}
        for term in terms
        for expr in ours
    ]
