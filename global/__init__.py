"""Volcano Global: the Global control plane (installed as the `volcano_global` package)."""

__version__ = "0.1.0"
