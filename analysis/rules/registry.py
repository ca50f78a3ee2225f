"""The anomalies, in one table: each one's name, definition, what one count is, the order its
examples are listed in, and whether only transactions can show it. Each finder claims its entry
where it is written (`@finds("lost-write")`, analysis/checking/claims.py), and the checker calls
the finder claimed for each entry (analysis/checking/finders.py); this module stays free of Spark.

Everything else is generated from it: the anomaly table of docs/checker.md (between the markers
below; `python -m analysis.rules.registry docs/checker.md` rewrites it, `--check` exits 1 when it is
out of date), the meanings the run report prints, and the checker's list of checks. The order
of the table is a stable key: results.json's "counts" and "examples", the reports and the
tests list the anomalies in it.

Definitions use the vocabulary of docs/checker.md (read, ok write, observed positions, observed
order); `backticks` mark history terms (op types) and are dropped in the report.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Anomaly:
    name: str  # the key in results.json
    definition: str  # one or two sentences, markdown
    counted_per: str  # what one count is
    example_order: tuple[str, ...]  # the columns examples are sorted by
    # Only ops of several records (txns) can show it. A history without a txn holds none, and the
    # count job leaves its finder out rather than plan it (on a 2M-event history of sends and
    # polls, counting them took 0.3-4.9 s each, mostly planning, for 0). One exception: a value
    # observed on two keys can close a G0 without a txn, and the checker then counts G0 too.
    txns_only: bool = False


REGISTRY: tuple[Anomaly, ...] = (
    Anomaly("inconsistent-offsets",
            "one (key, offset) observed with two or more different values — two replicas disagreed "
            "about the log (divergence, e.g. after an unclean election or a lost acks=1 write whose "
            "offset was reused).",
            "(key, offset)", ("key",)),
    Anomaly("duplicate",
            "one value observed at two or more different (key, offset) positions — it was written "
            "more than once (e.g. a retried send without idempotence).",
            "value", ("value",)),
    Anomaly("lost-write",
            "an ok write (acknowledged `ok`, or `info` but proved by a read) at offset o of key K whose "
            "value no read ever returned, although "
            "some read on K returned an offset greater than o — readers went past its position and it "
            "was not there.",
            "value", ("key",)),
    Anomaly("unseen",
            "an ok write (acknowledged `ok`, or `info` but proved by a read) whose value no read "
            "returned and that is not a lost-write (no "
            "read on its key went past it, or its offset is unknown). It is lost only if the final "
            "drain is known to have reached every high watermark.",
            "value", ("key",)),
    Anomaly("nonmonotonic-send",
            "within one process, `ok` sends to the same key (plain ones, and those of `ok` txns), "
            "taken in the order their ops were invoked and a txn's in the order it lists them, where "
            "a send of one op is acknowledged at an offset not above the previous send of an earlier "
            "op — the producer's records were reordered (or one overwrote another's position). Two "
            "sends of one txn are int-nonmonotonic-send's to judge.",
            "adjacent pair of sends", ("key",)),
    Anomaly("nonmonotonic-poll",
            "within one process, two successive reads of the same key — inside one poll, or in two "
            "`ok` polls or txns with no `ok`/`info` assign or subscribe of that process between "
            "them that resets the key (one that no longer covers it, or seeks the beginning; one "
            "that still covers it keeps the sequence, a group rebalance's included) — whose offsets "
            "do not strictly increase: the consumer went backwards or read a position twice. The "
            "first record of a key that a `fail` or `info` txn returned is held to the same order "
            "after the process's last read of it, and moves nothing on. Pairs with a group "
            "rebalance between their reads are counted too, and listed in `across_rebalance`.",
            "adjacent pair of reads", ("key",)),
    Anomaly("poll-skip",
            "two successive reads as for nonmonotonic-poll (a `fail` or `info` txn's first record of "
            "a key included), where the second is beyond the first by more than one position in the "
            "key's observed order: a record known to exist (some op observed it at an offset in "
            "between) was jumped over.",
            "adjacent pair of reads", ("key",)),
    Anomaly("aborted-read",
            "a read returned a value whose send, or whose transaction, completed `fail` (definitely "
            "not written, or aborted). `info` writes are unknown, never failures.",
            "value", ("value",)),
    Anomaly("int-nonmonotonic-send",
            "within one `txn` (any outcome), two successive sends to the same key, in the order the "
            "txn lists them, whose positions do not strictly increase. A send's position is its "
            "acknowledged offset or, when it has none, the lowest offset a read returned its value at; "
            "a pair with an unknown position is not judged.",
            "adjacent pair of sends", ("key",), txns_only=True),
    Anomaly("int-send-skip",
            "within one `txn`, two successive sends to the same key (positions as for "
            "int-nonmonotonic-send) with an observed position strictly between them: another "
            "writer's record landed inside the transaction's run of records. Kafka permits it.",
            "adjacent pair of sends", ("key",), txns_only=True),
    Anomaly("int-nonmonotonic-poll",
            "within one `txn` (any outcome: a poller must return safe data whether or not its "
            "transaction commits), two successive records of the same key, in the order returned, "
            "whose offsets do not strictly increase.",
            "adjacent pair of reads", ("key",), txns_only=True),
    Anomaly("int-poll-skip",
            "within one `txn` (any outcome), two successive records of the same key with an "
            "observed offset strictly between them: the transaction's reads jumped over a record "
            "known to exist.",
            "adjacent pair of reads", ("key",), txns_only=True),
    Anomaly("precommitted-read",
            "a `txn` read a record that it sent itself: its own write was visible before it "
            "committed (a read_committed consumer must never see an uncommitted record, its "
            "producer's included).",
            "(txn, value)", ("key",), txns_only=True),
    Anomaly("G0",
            "a cycle of ww dependencies between ops (write cycle): on each key the writers of "
            "successive values in observed order are linked, and these links loop back. Kafka "
            "permits it: transactions do not isolate their writes from each other.",
            "strongly connected component", ("size",), txns_only=True),
    Anomaly("G1c",
            "a cycle of ww and wr dependencies holding at least one wr edge (a reader of a value "
            "depends on its writer): circular information flow between transactions. A cycle of wr "
            "edges alone is impossible at read_committed; one that needs a ww edge is permitted "
            "(sends reach the log before their commit, so ww order is no commit order).",
            "strongly connected component", ("size",), txns_only=True),
    # The exactly-once pipeline (the eos workload: input at keys below 1000, output at 1000 + p,
    # an output value V' made from the input value V' mod 1e9; a pipeline txn sends to the output).
    Anomaly("eos-lost",
            "an input value of the exactly-once pipeline (observed at offset o of an input key K) that "
            "no read of the output returned any value made from, although an `ok` pipeline txn read K "
            "at an offset of o or more: the pipeline committed its input offsets past it. Like unseen, "
            "it counts only once the final drain read the output to its end.",
            "input value", ("key",), txns_only=True),
    Anomaly("eos-duplicate",
            "an input value of the exactly-once pipeline from which reads of the output returned "
            "values at two or more (key, offset) positions: it was processed and committed more than "
            "once.",
            "input value", ("value",), txns_only=True),
    Anomaly("eos-G1c",
            "a cycle of the pipeline's txns through the input and the output: wr edges between pipeline "
            "txns, and T → T′ when T′ (`ok` or `info`) began reading an input key at the observed "
            "offset right after the last one the `ok` pipeline txn T read there (T′ read the input "
            "offset T committed). Each edge orders T's commit before T′'s reads, so no such cycle can "
            "happen.",
            "strongly connected component", ("size",), txns_only=True),
)

ANOMALIES: tuple[str, ...] = tuple(a.name for a in REGISTRY)
BY_NAME: dict[str, Anomaly] = {a.name: a for a in REGISTRY}
MAX_EXAMPLES = 20  # examples kept per anomaly in results.json

START, END = "<!-- anomalies:start -->", "<!-- anomalies:end -->"


def meaning(name: str) -> str:
    """The definition as the report prints it: plain text (the page escapes HTML, so markdown
    would show), without the final period (the report punctuates it itself)."""
    return BY_NAME[name].definition.replace("`", "").rstrip(".")


def docs_table() -> str:
    """The markdown table of docs/checker.md."""
    cell = lambda text: text.replace("|", "\\|")  # noqa: E731 - a pipe would end the cell
    rows = ["| name | definition | counted per |", "|---|---|---|"]
    rows += [f"| `{a.name}` | {cell(a.definition)} | {cell(a.counted_per)} |" for a in REGISTRY]
    return "\n".join(rows)


def with_table(text: str) -> str:
    """`text` (docs/checker.md) with the table between the markers replaced by docs_table().
    ValueError when the markers are missing or out of order."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {START} ... {END} markers around the anomaly table")
    return text[:start + len(START)] + "\n" + docs_table() + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.rules.registry",
        description="Rewrite the anomaly table of docs/checker.md from analysis/rules/registry.py.")
    parser.add_argument("doc", nargs="?", type=Path, default=Path(__file__).resolve().parents[2] / "docs" / "checker.md",
                        help="the markdown file with the markers (default: this checkout's docs/checker.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when the table is out of date")
    args = parser.parse_args(argv)
    try:
        text = args.doc.read_text(encoding="utf-8")
        new = with_table(text)
    except (OSError, ValueError) as err:
        print(f"error: {args.doc}: {getattr(err, 'strerror', None) or err}", file=sys.stderr)
        return 2
    if new == text:
        return 0
    if args.check:
        print(f"{args.doc}: the anomaly table is out of date; run python -m analysis.rules.registry {args.doc}",
              file=sys.stderr)
        return 1
    try:
        args.doc.write_text(new, encoding="utf-8")
    except OSError as err:
        print(f"error: {args.doc}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"rewrote the anomaly table of {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
