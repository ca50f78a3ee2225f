"""Nemeses: faults injected into the cluster (partitions, kills, pauses, clock skew, packet loss)."""
