"""`campaign` and `replay-find` (issue 38, docs/guided.md): the page of a detect store's campaign,
and the replays of one of its finds."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

console = Console(stderr=True)


@click.command()
@click.argument("store", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Write the page here.  [default: STORE/campaign.html]")
@click.option("--replays", "replay_ledgers", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="LEDGER", help="Also read this replays.jsonl (replay-find --store elsewhere); repeatable. "
              "STORE/replays.jsonl is always read.")
def campaign(store: Path, out: Path | None, replay_ledgers: tuple[Path, ...]) -> None:
    """The campaign page of a detect STORE: coverage over time (union of distinct abstract states and
    transitions, one line per schedule), every find with its report, its first evidence, its replay
    command and its replays, and a summary per (version, profile, schedule). One offline HTML file;
    its path is the last line printed. Exit 0, or 2 when STORE holds no detect ledger."""
    from harness.experiments.campaign_page import render_campaign

    click.echo(str(render_campaign(store, out, list(replay_ledgers))))


@click.command(name="replay-find")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--times", default=5, show_default=True, type=click.IntRange(min=1), help="Replays wanted in all.")
@click.option("--store", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Replays go to STORE/<version>/ and STORE/replays.jsonl.  [default: the find's store, RUN_DIR/../..]")
def replay_find_command(run_dir: Path, times: int, store: Path | None) -> None:
    """Replay a find (a run invalid for a forbidden loss or divergence) until STORE/replays.jsonl holds
    TIMES replays of it with a verdict, each `run --replay RUN_DIR/config.json`; replays already
    there are not repeated. Prints each replay, then "reproduced k of N". Exit 0 once every replay
    has a verdict (a replay that does not reproduce is a measurement), 2 on bad input or when a
    replay could not complete (run the command again to retry it)."""
    from harness.errors import HarnessError
    from harness.experiments.replays import replay_find

    def progress(r, recorded: bool) -> None:  # type: ignore[no-untyped-def]
        what = "FAILED: " + r.failed if r.failed else (f"{r.verdict}, lost {r.lost}, diverged {r.diverged}, "
                                                       f"forbidden {', '.join(r.forbidden) or '-'}")
        console.print(f"replay {r.settings['replay']}/{times}: {what}{'  FOUND' if r.found else ''}"
                      f"{' (recorded earlier)' if recorded else ''}  {r.run_dir}", highlight=False)

    replays = replay_find(run_dir, times, store, on_replay=progress)
    click.echo(f"reproduced {sum(r.found for r in replays)} of {len(replays)}")
    if len(replays) < times:
        raise HarnessError(f"{times - len(replays)} of {times} replays of {run_dir} could not complete (see above).",
                           hint="run the same command again: replays with a verdict are kept, the others are retried")
    sys.exit(0)
