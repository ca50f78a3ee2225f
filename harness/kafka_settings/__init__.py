"""Kafka settings a user gives a run (issue 35 item 5): `--broker-config`, `--topic-config`,
`--producer-config` and `--consumer-config K=V`, or the matching TOML tables.

- given.py: parsing `K=V`, the keys the harness keeps for itself, and secrets (never written down);
- check.py: refusing bad input before anything starts (exit 2): unknown keys, bad values, settings
  the chosen client or Kafka version does not have, and contradictions the client would refuse;
- jvm.py and ConfigCheck.java: Kafka's own ConfigDefs, read from the very jars the run starts;
- librdkafka.py: librdkafka's own checks, by making (and at once dropping) a client.

How they combine with the profile, and what the checker is told each setting came from, is
workloads/profile_settings.py.
"""
