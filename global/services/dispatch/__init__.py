"""After a placement is committed: the agents' status reports that drive a job through
Dispatched, Running and Succeeded (cross-cluster gang), and the supervision that withdraws or
requeues a gang that did not start or lost a cluster."""
