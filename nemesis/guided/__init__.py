"""Guided search (issue 38, docs/guided.md): observe the cluster as abstract states and steer the
fault schedule toward states not seen before.

- `loglines`: a broker log line -> a fact (truncation, ISR shrink, election, fencing, ...);
- `state`: facts, metadata, active faults and acknowledgements -> one short state per partition;
- `watch`: the run's StateWatch thread, which records each change as an `observed` history event;
- `coverage`: the store's coverage map (STORE/guided-coverage.json), grown by every guided run;
- `scheduler`: `GuidedScheduler`, the `--schedule guided` Scheduler (Q-learning on novelty).
"""
