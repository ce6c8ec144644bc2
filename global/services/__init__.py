"""Domain logic, one subpackage per concept. Functions take the session first and keyword-only
arguments; they flush, and the request or task boundary commits.

Imports run down this list, never up (import-linter checks it): `scheduling` (rounds: the
snapshot, the commit, the capacity view, previews) and `overview`; `dispatch` (agents' reports,
gang supervision) and `jobs` (submission, cancellation, what the API shows); `lifecycle` (the
job and placement state machines, the outbox their changes write) and `inventory` (clusters,
their nodes and topology, heartbeats, links); `tenancy` (queues, tokens); `events`."""
