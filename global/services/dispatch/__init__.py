"""After a placement is committed and sent (the outbox: `services/lifecycle/outbox.py`): the
agents' status reports that drive a job through Dispatched, Running and Succeeded
(`reports.py`, cross-cluster gang), the supervision that withdraws or requeues a gang that did
not start or lost a cluster (`supervision.py`), and the reconciliation of what a cluster holds
with what it should (`reconcile.py`). Nothing here places a job or sends an assignment."""
