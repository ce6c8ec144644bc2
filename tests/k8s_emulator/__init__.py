"""A Kubernetes API server emulator for tests: real HTTP, the semantics the agent relies on."""

from tests.k8s_emulator.server import KubeEmulator

__all__ = ["KubeEmulator"]
