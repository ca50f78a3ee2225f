"""One run's lifecycle: its settings (flags, TOML, replay), its directory, its steps (cluster, workload, faults, heal, drain) and its finish (check and report)."""
