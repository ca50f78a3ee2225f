"""Workloads: clients that produce and consume against a cluster and record what happened."""
