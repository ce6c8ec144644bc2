"""The fleet as the agents report it: member clusters (registration, tokens, health from
heartbeats), their inventory (snapshots, deltas, the topology tree per generation, the clusters'
GPU aggregates) and the links between them."""
