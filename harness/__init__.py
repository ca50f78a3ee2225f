"""Cluster lifecycle, run orchestration and history for the Kafka chaos harness."""
