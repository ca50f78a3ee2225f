"""The Spark checker: loads a history, finds the anomalies of the registry, and writes results.json."""
