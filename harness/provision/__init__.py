"""Preparing a machine: settings, the Docker engine, the base image, Kafka's jars from Maven
Central, `bootstrap` (all of them, idempotently) and `cleanup` of what killed runs left."""
