"""The data a member cluster holds, by the label convention of docs/data.md: a
PersistentVolumeClaim or a Fluid Dataset (data.fluid.io/v1alpha1) labelled
`datadependency.volcano.sh/source: <DataSource name>`, in any namespace, counts once its
`status.phase` is Bound. Both are watched by the label's key (a cluster without Fluid's CRD is
told once and watched again when it is installed: watcher.py); the agent's client reports
the names (core_agent/presence.py)."""

from __future__ import annotations

import logging
from typing import Any

from core_agent.kubernetes.adapter import PVCS, Kind
from core_agent.kubernetes.watcher import Store
from volcano_global.rpc.data import is_data_source_name

SOURCE_LABEL = "datadependency.volcano.sh/source"
LABELLED_PVCS = Kind(PVCS, label_selector=SOURCE_LABEL)
FLUID_DATASETS = Kind("fluiddatasets", label_selector=SOURCE_LABEL)
BOUND = "Bound"  # the phase of a bound PVC, and of a Fluid Dataset bound to its runtime
MAX_WARNED = 10_000  # objects whose bad label was logged, remembered (memory bound)
log = logging.getLogger(__name__)


class DataHeld:
    """The labelled PVCs and Fluid Datasets of the cluster (kept by their watchers) and the
    data sources they say are here."""

    def __init__(self) -> None:
        self.pvcs: Store = {}
        self.datasets: Store = {}
        self._warned: set[tuple[str, str, str]] = set()  # (kind, object, label value)

    def watched(self) -> tuple[tuple[Kind, Store], ...]:
        return ((LABELLED_PVCS, self.pvcs), (FLUID_DATASETS, self.datasets))

    def present(self) -> set[str]:
        """The data sources whose PVC or Fluid Dataset is Bound. A label value that cannot be a
        DataSource's name is left out, with one warning per object."""
        names = set()
        for what, store in (("PersistentVolumeClaim", self.pvcs), ("Dataset", self.datasets)):
            for key, obj in store.items():
                name = _named(obj)
                if name is None:
                    continue
                if not is_data_source_name(name):
                    self._warn(what, key, name)
                elif (obj.get("status") or {}).get("phase") == BOUND:
                    names.add(name)
        return names

    def _warn(self, what: str, key: str, value: str) -> None:
        if (what, key, value) in self._warned:
            return
        if len(self._warned) >= MAX_WARNED:
            self._warned.clear()
        self._warned.add((what, key, value))
        log.warning(
            "%s %s: label %s=%r is not a DataSource name (a DNS subdomain): ignored",
            what,
            key,
            SOURCE_LABEL,
            value[:80],
        )


def _named(obj: dict[str, Any]) -> str | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(SOURCE_LABEL)
    return value if isinstance(value, str) else None
