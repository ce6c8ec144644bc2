"""The fleet as the agents report it: member clusters (registration, tokens, health from
heartbeats), their inventory (snapshots, deltas, the topology tree per generation, the GPU
aggregates the solver reads) and the links between them."""
