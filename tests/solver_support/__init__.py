"""Helpers of the solver tests: an independent checker and instance builders."""
