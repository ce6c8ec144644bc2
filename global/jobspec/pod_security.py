"""The Kubernetes Pod Security Standards (baseline and restricted), checked over every pod
template of a Volcano Job or HyperJob as Pod Security Admission checks a pod, so that a job
the Global lets through cannot reach past its containers in a member cluster. Pure.

The controls are those of the Kubernetes "Pod Security Standards" page (v1.31): baseline
forbids HostProcess, host namespaces, privileged containers, capabilities beyond the default
set, hostPath volumes, host ports, an unconfined AppArmor or seccomp profile, custom SELinux
user/role/type, a non-default /proc mount and unsafe sysctls; restricted adds the volume types,
no privilege escalation, running as non-root (and not as UID 0), a RuntimeDefault or Localhost
seccomp profile, and capabilities dropped to ALL (NET_BIND_SERVICE may be added back).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from volcano_global.jobspec.fields import child

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)  # from the most permissive

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    }
)  # fmt: skip
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
        "projected", "secret",
    }
)  # fmt: skip
CONFINED_PROFILES = frozenset({"RuntimeDefault", "Localhost"})
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_ANNOTATIONS = (
    "seccomp.security.alpha.kubernetes.io/pod",
    "container.seccomp.security.alpha.kubernetes.io/",
)


@dataclass(frozen=True)
class Violation:
    """One field a pod template may not hold at a pod security level."""

    field: str
    level: str  # the lowest level that forbids it
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (pod security {self.level})"


def pod_templates(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template of a Volcano Job (`spec.tasks[i].template`) or HyperJob
    (`spec.replicatedJobs[i].templateSpec.tasks[j].template`), with its path."""
    spec = _map(document, "spec")
    if document.get("kind") == "HyperJob":
        for index, entry in enumerate(_list(spec, "replicatedJobs")):
            path = child(child("spec.replicatedJobs", index), "templateSpec")
            yield from _task_templates(_map(entry, "templateSpec"), path)
    else:
        yield from _task_templates(spec, "spec")


def _task_templates(spec: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for index, task in enumerate(_list(spec, "tasks")):
        template = _map(task, "template")
        yield child(child(child(path, "tasks"), index), "template"), template


def check_pod_security(
    document: dict[str, Any],
    level: str,
    templates: Sequence[tuple[str, dict[str, Any]]] | None = None,
) -> list[Violation]:
    """What every pod template of the document breaks at `level` (privileged: nothing).
    `templates`: its `pod_templates`, if the caller has them already."""
    if level == PRIVILEGED:
        return []
    found: list[Violation] = []
    for path, template in pod_templates(document) if templates is None else templates:
        found += baseline_violations(template, path)
        if level == RESTRICTED:
            found += restricted_violations(template, path)
    return found


def containers(pod: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for key in CONTAINER_LISTS:
        for index, container in enumerate(_list(pod, key)):
            if isinstance(container, dict):
                yield child(child(path, key), index), container


def baseline_violations(template: dict[str, Any], path: str) -> list[Violation]:
    pod, spec_path = _map(template, "spec"), child(path, "spec")
    found = _host_namespaces(pod, spec_path)
    # Most pods and containers set no securityContext (and containers no ports): nothing
    # of theirs below can be broken, and their paths are not built.
    pod_context = _map(pod, "securityContext")
    if pod_context:
        pod_context_path = child(spec_path, "securityContext")
        found += _context_violations(pod_context, pod_context_path)
        found += _sysctls(pod_context, pod_context_path)
    for index, volume in enumerate(_list(pod, "volumes")):
        if isinstance(volume, dict) and volume.get("hostPath") is not None:
            volume_path = child(child(child(spec_path, "volumes"), index), "hostPath")
            found.append(Violation(volume_path, BASELINE, "hostPath volumes are not allowed"))
    for container_path, container in containers(pod, spec_path):
        context = _map(container, "securityContext")
        if context or "ports" in container:
            context_path = child(container_path, "securityContext")
            found += _context_violations(context, context_path)
            found += _container_violations(container, context, container_path, context_path)
    return found + _annotation_violations(_map(_map(template, "metadata"), "annotations"), path)


def _host_namespaces(pod: dict[str, Any], path: str) -> list[Violation]:
    return [
        Violation(child(path, key), BASELINE, "sharing the host's namespaces is not allowed")
        for key in ("hostNetwork", "hostPID", "hostIPC")
        if pod.get(key) not in (None, False)
    ]


def _context_violations(context: dict[str, Any], path: str) -> list[Violation]:
    """The controls a pod's and a container's securityContext share."""
    found: list[Violation] = []
    if _map(context, "windowsOptions").get("hostProcess") not in (None, False):
        found.append(
            Violation(
                child(child(path, "windowsOptions"), "hostProcess"),
                BASELINE,
                "HostProcess containers are not allowed",
            )
        )
    selinux, selinux_path = _map(context, "seLinuxOptions"), child(path, "seLinuxOptions")
    if not _member(selinux.get("type") or "", SELINUX_TYPES):
        found.append(
            Violation(
                child(selinux_path, "type"),
                BASELINE,
                f"must be one of {', '.join(sorted(t for t in SELINUX_TYPES if t))}",
            )
        )
    for key in ("user", "role"):
        if selinux.get(key) not in (None, ""):
            found.append(Violation(child(selinux_path, key), BASELINE, "must not be set"))
    for key in ("seccompProfile", "appArmorProfile"):
        if _map(context, key).get("type") == "Unconfined":
            found.append(
                Violation(child(child(path, key), "type"), BASELINE, "Unconfined is not allowed")
            )
    return found


def _container_violations(
    container: dict[str, Any], context: dict[str, Any], path: str, context_path: str
) -> list[Violation]:
    found: list[Violation] = []
    if context.get("privileged") not in (None, False):
        found.append(
            Violation(
                child(context_path, "privileged"), BASELINE, "privileged containers are not allowed"
            )
        )
    capabilities = _map(context, "capabilities")
    for index, name in enumerate(_list(capabilities, "add")):
        if not _member(name, BASELINE_CAPABILITIES):
            found.append(
                Violation(
                    child(child(child(context_path, "capabilities"), "add"), index),
                    BASELINE,
                    f"capability {name!r} is not in the default set",
                )
            )
    if context.get("procMount") not in (None, "Default"):
        found.append(Violation(child(context_path, "procMount"), BASELINE, "must be Default"))
    for index, port in enumerate(_list(container, "ports")):
        if isinstance(port, dict) and port.get("hostPort") not in (None, 0):
            found.append(
                Violation(
                    child(child(child(path, "ports"), index), "hostPort"),
                    BASELINE,
                    "host ports are not allowed",
                )
            )
    return found


def _sysctls(context: dict[str, Any], path: str) -> list[Violation]:
    found: list[Violation] = []
    for index, sysctl in enumerate(_list(context, "sysctls")):
        name = sysctl.get("name") if isinstance(sysctl, dict) else sysctl
        if not _member(name, SAFE_SYSCTLS):
            found.append(
                Violation(
                    child(child(child(path, "sysctls"), index), "name"),
                    BASELINE,
                    f"sysctl {name!r} is not a safe sysctl",
                )
            )
    return found


def _annotation_violations(annotations: dict[str, Any], path: str) -> list[Violation]:
    """The older AppArmor and seccomp annotations, which still take effect."""
    found: list[Violation] = []
    for key, value in annotations.items():
        field = child(child(child(path, "metadata"), "annotations"), str(key))
        if str(key).startswith(APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            found.append(Violation(field, BASELINE, "must be runtime/default or localhost/*"))
        elif str(key).startswith(SECCOMP_ANNOTATIONS) and value == "unconfined":
            found.append(Violation(field, BASELINE, "unconfined is not allowed"))
    return found


def restricted_violations(template: dict[str, Any], path: str) -> list[Violation]:
    pod, spec_path = _map(template, "spec"), child(path, "spec")
    pod_context = _map(pod, "securityContext")
    pod_context_path = child(spec_path, "securityContext")
    found: list[Violation] = []
    for index, volume in enumerate(_list(pod, "volumes")):
        kinds = set(volume) - {"name"} if isinstance(volume, dict) else set()
        for kind in sorted(kinds - RESTRICTED_VOLUMES - {"hostPath"}):  # hostPath: baseline
            found.append(
                Violation(
                    child(child(child(spec_path, "volumes"), index), kind),
                    RESTRICTED,
                    f"volume type {kind} is not allowed "
                    f"(allowed: {', '.join(sorted(RESTRICTED_VOLUMES))})",
                )
            )
    if pod_context.get("runAsUser") == 0:
        found.append(
            Violation(child(pod_context_path, "runAsUser"), RESTRICTED, "must not be 0 (root)")
        )
    for container_path, container in containers(pod, spec_path):
        found += _restricted_container(pod_context, pod_context_path, container, container_path)
    return found


def _restricted_container(
    pod_context: dict[str, Any],
    pod_context_path: str,
    container: dict[str, Any],
    path: str,
) -> list[Violation]:
    context, context_path = _map(container, "securityContext"), child(path, "securityContext")
    found: list[Violation] = []
    if context.get("allowPrivilegeEscalation") is not False:
        found.append(
            Violation(child(context_path, "allowPrivilegeEscalation"), RESTRICTED, "must be false")
        )
    non_root = context.get("runAsNonRoot")
    if non_root is None:  # the container's own setting wins over the pod's
        non_root = pod_context.get("runAsNonRoot")
    if non_root is not True:
        found.append(
            Violation(
                child(context_path, "runAsNonRoot"),
                RESTRICTED,
                f"must be true (here or in {pod_context_path}.runAsNonRoot)",
            )
        )
    if context.get("runAsUser") == 0:
        found.append(Violation(child(context_path, "runAsUser"), RESTRICTED, "must not be 0"))
    seccomp = _map(context, "seccompProfile").get("type") or _map(
        pod_context, "seccompProfile"
    ).get("type")
    if not _member(seccomp, CONFINED_PROFILES):
        found.append(
            Violation(
                child(child(context_path, "seccompProfile"), "type"),
                RESTRICTED,
                f"must be RuntimeDefault or Localhost (here or in {pod_context_path})",
            )
        )
    return found + _restricted_capabilities(_map(context, "capabilities"), context_path)


def _restricted_capabilities(capabilities: dict[str, Any], context_path: str) -> list[Violation]:
    path = child(context_path, "capabilities")
    found: list[Violation] = []
    if "ALL" not in _list(capabilities, "drop"):
        found.append(Violation(child(path, "drop"), RESTRICTED, "must contain ALL"))
    for index, name in enumerate(_list(capabilities, "add")):
        if name != "NET_BIND_SERVICE" and _member(name, BASELINE_CAPABILITIES):
            found.append(
                Violation(
                    child(child(path, "add"), index),
                    RESTRICTED,
                    f"capability {name!r} may not be added (only NET_BIND_SERVICE)",
                )
            )
    return found


def _member(value: Any, allowed: frozenset[str]) -> bool:
    """`value in allowed` for any value a document may hold (a list is not hashable)."""
    return isinstance(value, str) and value in allowed


def _map(obj: Any, key: str) -> dict[str, Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _list(obj: Any, key: str) -> list[Any]:
    """A list field; any other value (which Kubernetes would refuse) as a one-item list, so
    that it is judged rather than skipped."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
