"""The state machines of jobs and placements, and the dispatch outbox their changes write to
(assignments and cancellations for the agents, in the same transaction as the change)."""
