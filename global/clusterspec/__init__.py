"""Simulated clusters as data: the YAML spec of one (node groups and HyperNode tiers, or a
block of the real Lingjun fabric) and the nodes and domains it lays out. Pure, so the agent's
simulated cluster and the what-if simulator share it without depending on each other."""
