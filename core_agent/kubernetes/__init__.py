"""The Kubernetes inventory source: list+watch Nodes, bound Pods and HyperNodes."""
