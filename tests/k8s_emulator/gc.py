"""Garbage collection of owned objects, as kube-controller-manager's garbage collector does
after a delete with background propagation: a dependent none of whose ownerReferences (by uid)
is left is deleted, then its own dependents. It runs after the delete has been answered, as the
real collector does. `Orphan` propagation leaves dependents. Deviation: `Foreground` is treated
as `Background` (the owner does not wait, with a `foregroundDeletion` finalizer, for them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.k8s_emulator.server import KubeEmulator


def collect(emulator: KubeEmulator) -> int:
    """Delete every object whose owners are all gone, until none is left; how many it deleted."""
    deleted = 0
    while True:
        live = {
            obj["metadata"].get("uid")
            for objects in emulator.objects.values()
            for obj in objects.values()
        }
        orphans = [
            (gvr, namespace, name)
            for gvr, objects in emulator.objects.items()
            for (namespace, name), obj in objects.items()
            if (refs := obj["metadata"].get("ownerReferences"))
            and not any(ref.get("uid") in live for ref in refs)
        ]
        if not orphans:
            return deleted
        for gvr, namespace, name in orphans:
            emulator.delete(gvr, name, namespace)
            deleted += 1
