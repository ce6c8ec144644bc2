"""The Pod Security Standards over a job's pod templates: each baseline and restricted control
refused at the field that breaks it, with its level; a hardened pod passes restricted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.factories import job_document
from volcano_global.jobspec.pod_security import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    check_pod_security,
    pod_templates,
)

POD = "spec.tasks[0].template.spec"
CONTAINER = f"{POD}.containers[0]"


def job_with(pod: dict[str, Any] | None = None, **container: Any) -> dict[str, Any]:
    document = job_document("train")
    template = document["spec"]["tasks"][0]["template"]
    template["spec"].update(pod or {})
    template["spec"]["containers"][0].update(container)
    return document


def hardened() -> dict[str, Any]:
    return job_with(
        {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}},
        securityContext={
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
    )


def fields(document: dict[str, Any], level: str) -> list[str]:
    return [v.field for v in check_pod_security(document, level)]


BASELINE_BREACHES = [
    ({"hostNetwork": True}, {}, f"{POD}.hostNetwork"),
    ({"hostPID": True}, {}, f"{POD}.hostPID"),
    ({"hostIPC": True}, {}, f"{POD}.hostIPC"),
    (
        {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        {},
        f"{POD}.volumes[0].hostPath",
    ),
    (
        {"securityContext": {"windowsOptions": {"hostProcess": True}}},
        {},
        f"{POD}.securityContext.windowsOptions.hostProcess",
    ),
    (
        {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
        {},
        f"{POD}.securityContext.sysctls[0].name",
    ),
    (
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
        {},
        f"{POD}.securityContext.seccompProfile.type",
    ),
    (
        {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}},
        {},
        f"{POD}.securityContext.seLinuxOptions.type",
    ),
    ({}, {"securityContext": {"privileged": True}}, f"{CONTAINER}.securityContext.privileged"),
    (
        {},
        {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
        f"{CONTAINER}.securityContext.capabilities.add[0]",
    ),
    ({}, {"securityContext": {"procMount": "Unmasked"}}, f"{CONTAINER}.securityContext.procMount"),
    (
        {},
        {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
        f"{CONTAINER}.securityContext.appArmorProfile.type",
    ),
    (
        {},
        {"securityContext": {"seLinuxOptions": {"user": "system_u"}}},
        f"{CONTAINER}.securityContext.seLinuxOptions.user",
    ),
    ({}, {"ports": [{"containerPort": 80, "hostPort": 80}]}, f"{CONTAINER}.ports[0].hostPort"),
]


@pytest.mark.parametrize(("pod", "container", "field"), BASELINE_BREACHES)
def test_each_baseline_control_is_refused_at_its_field(
    pod: dict[str, Any], container: dict[str, Any], field: str
) -> None:
    document = job_with(pod, **container)
    found = check_pod_security(document, BASELINE)
    assert [v.field for v in found] == [field]
    assert found[0].level == BASELINE and "(pod security baseline)" in str(found[0])
    assert field in fields(document, RESTRICTED)  # restricted includes baseline
    assert check_pod_security(document, PRIVILEGED) == []


def test_a_plain_pod_meets_baseline_and_not_restricted() -> None:
    document = job_document("train")
    assert check_pod_security(document, BASELINE) == []
    assert sorted(fields(document, RESTRICTED)) == [
        f"{CONTAINER}.securityContext.allowPrivilegeEscalation",
        f"{CONTAINER}.securityContext.capabilities.drop",
        f"{CONTAINER}.securityContext.runAsNonRoot",
        f"{CONTAINER}.securityContext.seccompProfile.type",
    ]


def test_the_default_capabilities_and_safe_sysctls_meet_baseline() -> None:
    document = job_with(
        {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1"}]}},
        securityContext={"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"]}},
    )
    assert check_pod_security(document, BASELINE) == []


def test_a_hardened_pod_meets_restricted() -> None:
    assert check_pod_security(hardened(), RESTRICTED) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda pod, c: pod["volumes"].append({"name": "n", "nfs": {"server": "x"}}),
            f"{POD}.volumes[0].nfs",
        ),
        (lambda pod, c: c["securityContext"].pop("allowPrivilegeEscalation"), None),
        (
            lambda pod, c: c["securityContext"].update(runAsNonRoot=False),
            f"{CONTAINER}.securityContext.runAsNonRoot",
        ),
        (
            lambda pod, c: c["securityContext"].update(runAsUser=0),
            f"{CONTAINER}.securityContext.runAsUser",
        ),
        (
            lambda pod, c: pod["securityContext"].update(runAsUser=0),
            f"{POD}.securityContext.runAsUser",
        ),
        (
            lambda pod, c: pod["securityContext"].pop("seccompProfile"),
            f"{CONTAINER}.securityContext.seccompProfile.type",
        ),
        (
            lambda pod, c: c["securityContext"]["capabilities"].update(drop=["NET_RAW"]),
            f"{CONTAINER}.securityContext.capabilities.drop",
        ),
        (
            lambda pod, c: c["securityContext"]["capabilities"].update(add=["CHOWN"]),
            f"{CONTAINER}.securityContext.capabilities.add[0]",
        ),
    ],
)
def test_each_restricted_control_is_refused_at_its_field(change: Any, field: str | None) -> None:
    document = hardened()
    pod = document["spec"]["tasks"][0]["template"]["spec"]
    pod.setdefault("volumes", [])
    change(pod, pod["containers"][0])
    found = check_pod_security(document, RESTRICTED)
    expected = field or f"{CONTAINER}.securityContext.allowPrivilegeEscalation"
    assert [v.field for v in found] == [expected]
    assert found[0].level == RESTRICTED
    assert check_pod_security(document, BASELINE) == []


def test_init_containers_and_apparmor_annotations_are_checked() -> None:
    document = job_with({"initContainers": [{"name": "i", "securityContext": {"privileged": 1}}]})
    template = document["spec"]["tasks"][0]["template"]
    template["metadata"] = {
        "annotations": {"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}
    }
    assert fields(document, BASELINE) == [
        f"{POD}.initContainers[0].securityContext.privileged",
        'spec.tasks[0].template.metadata.annotations["container.apparmor.security.beta'
        '.kubernetes.io/trainer"]',
    ]


def test_every_template_of_a_hyperjob_is_checked() -> None:
    member = job_document("m")["spec"]
    bad = copy.deepcopy(member)
    bad["tasks"][0]["template"]["spec"]["hostPID"] = True
    hyperjob = {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "h"},
        "spec": {
            "replicatedJobs": [
                {"name": "a", "templateSpec": member},
                {"name": "b", "templateSpec": bad},
            ]
        },
    }
    assert [path for path, _ in pod_templates(hyperjob)] == [
        "spec.replicatedJobs[0].templateSpec.tasks[0].template",
        "spec.replicatedJobs[1].templateSpec.tasks[0].template",
    ]
    assert fields(hyperjob, BASELINE) == [
        "spec.replicatedJobs[1].templateSpec.tasks[0].template.spec.hostPID"
    ]


def test_a_container_that_sets_run_as_non_root_false_overrides_the_pod() -> None:
    document = hardened()
    container = document["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["securityContext"]["runAsNonRoot"] = False
    assert fields(document, RESTRICTED) == [f"{CONTAINER}.securityContext.runAsNonRoot"]
    container["securityContext"]["runAsNonRoot"] = None  # unset: the pod's true holds
    assert check_pod_security(document, RESTRICTED) == []


def test_fields_of_the_wrong_type_are_judged_not_crashed_on() -> None:
    document = job_with(
        {"securityContext": {"sysctls": [["x"]], "seLinuxOptions": {"type": ["spc_t"]}}},
        securityContext={"capabilities": {"add": [{"SYS_ADMIN": 1}], "drop": "ALL"}},
    )
    assert fields(document, BASELINE) == [
        f"{POD}.securityContext.seLinuxOptions.type",
        f"{POD}.securityContext.sysctls[0].name",
        f"{CONTAINER}.securityContext.capabilities.add[0]",
    ]
    assert f"{CONTAINER}.securityContext.seccompProfile.type" in fields(document, RESTRICTED)
