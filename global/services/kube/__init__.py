"""Volcano Jobs and HyperJobs as Kubernetes objects, for the Kubernetes-compatible API
(`api/kube/`): the same jobs as `/api/v1/jobs`, read, changed and watched in Kubernetes terms."""
