"""Simulated member clusters built from real datacenter topology data."""
