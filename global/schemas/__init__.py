"""Pydantic models of the REST API (JSON field names in camelCase, as in Kubernetes)."""
