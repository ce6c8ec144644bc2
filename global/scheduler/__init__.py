"""The scheduling loop: leader election, rounds (snapshot -> solver -> atomic commit)."""
