"""The Kubernetes-compatible API under its own prefix (`/k8s`): discovery, OpenAPI, and the
Volcano kinds the Global serves, so an unchanged kubectl works against the Global."""
