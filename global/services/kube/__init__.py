"""Volcano Jobs and HyperJobs (`store.py`, `objects.py`) and the cluster-scoped kinds, Volcano
Queues and Kubernetes PriorityClasses (`cluster_scoped.py`), as Kubernetes objects for the
Kubernetes-compatible API (`api/kube/`): the same rows as `/api/v1/...`, read, changed and
watched in Kubernetes terms. "Cluster" here is Kubernetes' cluster scope, not a member
cluster."""
