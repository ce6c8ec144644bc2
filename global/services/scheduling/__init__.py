"""Scheduling rounds' database side: the snapshot a round solves, the commit of its decision,
the in-memory capacity view that keeps the snapshot cheap, the record of rounds, and previews
(a job's placement if it were first in line now)."""
