"""core_agent: the per-cluster agent (inventory from a member cluster, applies placements).

So far it holds the simulated cluster fabric used by `vglobal demo`; the gRPC agent and the
Kubernetes source come with the agent issue.
"""
