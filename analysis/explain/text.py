"""One plain sentence per explained example (the facts come from analysis/explain/explanations.py), and the
lines `check` prints: the first example of each anomaly with its sentence."""

from __future__ import annotations

from typing import Any

from analysis.explain.producer_evidence import TIMED_OUT
from analysis.rules.registry import ANOMALIES

FIRST = ("lost-write", "inconsistent-offsets", "duplicate")  # what an SRE reads first: data lost or diverged
VERBS = {"kill": "was being killed", "pause": "was paused", "start-partition": "was partitioned off",
         "start-loss": "was losing packets", "bump-clock": "had its clock bumped",
         "strobe-clock": "had its clock strobed", "cut": "had a link cut"}


def _short(utc: str | None) -> str:
    """'2026-11-23 12:03:04.123 UTC' -> '12:03:04.123 UTC' (kept '≈' when estimated)."""
    if not utc:
        return "an unknown wall-clock time"
    approx = utc.startswith("≈")
    body = utc.lstrip("≈")
    return ("≈" if approx else "") + (body[11:] if len(body) > 11 and body[10] == " " else body)


def when(x: dict[str, Any] | None) -> str:
    if not x:
        return "at an unknown time"
    return f"at {_short(x.get('utc'))} (t={x['t_s']:.3f} s)"


def _who(fault: dict[str, Any], partition: str | None, leader: dict[str, Any] | None) -> str:
    targets = fault.get("targets") or []
    if not targets:
        return "a broker"
    parts = []
    for b in targets:
        roles = [r for r in fault.get("roles", {}).get(str(b), [])]
        mine = [r for r in roles if partition and r == "leader of partition " + partition.rsplit("-", 1)[-1]]
        bits = ["leader when struck"] if mine else []
        if "controller" in roles:
            bits.append("controller")
        parts.append(f"broker {b}" + (f" ({', '.join(bits)})" if bits else ""))
    return " and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _verb(fault: dict[str, Any]) -> str:
    """VERBS in the number of the fault's targets: 'broker 3 and broker 2 were partitioned off'."""
    verb = VERBS.get(fault["fault"], "was under " + fault["label"])
    return "were" + verb[3:] if len(fault.get("targets") or []) > 1 and verb.startswith("was ") else verb


def faults_phrase(ctx: dict[str, Any]) -> str:
    """'while broker 2 (leader, epoch 5) was being killed', 'with no fault active', …"""
    at_done = ctx.get("faults_at_completion") or []
    at_invoke = [f for f in ctx.get("faults_at_invoke") or [] if f not in at_done]
    said = []
    for f in at_done:
        said.append(f"{_who(f, ctx.get('partition'), ctx.get('leader'))} {_verb(f)}")
    text = ("while " + "; and ".join(said)) if said else "with no fault active"
    if at_invoke:
        text += " (it was sent while " + "; and ".join(
            f"{_who(f, ctx.get('partition'), ctx.get('leader'))} {_verb(f)}"
            for f in at_invoke) + ")"
    return text


def after_phrase(ctx: dict[str, Any], until: str) -> str:
    """'; then, between the acknowledgements, broker 1 (the replica to be elected after broker 2) was killed at …'"""
    said = []
    for f in ctx.get("faults_after") or []:
        who = _who(f, ctx.get("partition"), ctx.get("leader"))
        if f.get("heir_of") is not None:
            who += f" (the replica to be elected after broker {f['heir_of']})"
        verb = _verb(f).replace("was being killed", "was killed").replace("were being killed", "were killed")
        said.append(f"{who} {verb} {when({'t_s': f['from_s'], 'utc': f.get('from_utc')})}")
    return f"; then, {until}, " + "; ".join(said) if said else ""


def _epoch(r: dict[str, Any]) -> str:
    return f"written in epoch {r['epoch']}" if r.get("epoch") is not None else "epoch not reported"


def _leader_clause(ctx: dict[str, Any]) -> str:
    """' (leader epoch 5; broker 2 led queue-0 as of 12:03:01.100 UTC)': the epoch from the
    records acknowledged just before, the broker from the last leader change known then."""
    ld = ctx.get("leader") or {}
    said = any(ld.get("broker") in (f.get("targets") or []) and ld.get("as_of_s") == f.get("from_s")
               for f in ctx.get("faults_at_completion") or [])
    bits = [f"leader epoch {ld['epoch']}"] if ld.get("epoch") is not None else []
    if ld.get("broker") is not None and not said:
        bits.append(f"broker {ld['broker']} led {ctx['partition']} as of {_short(ld.get('as_of_utc'))}")
    return f" ({'; '.join(bits)})" if bits else ""


def _read_elsewhere(ctx: dict[str, Any]) -> str:
    o, p = ctx.get("offset"), ctx.get("partition")
    instead = ctx.get("read_instead") or []
    if instead:
        return f"at offset {o} they read " + " and ".join(f"value {r['value']}, {_epoch(r)}" for r in instead)
    if ctx.get("read_at_offset"):  # not lost after all: only this value was read there
        return f"at offset {o} they read this very value"
    near = ctx.get("nearest_reads") or {}
    around = [f"offset {r['offset']} (value {r['value']}, {_epoch(r)})" for r in (near.get("below"), near.get("above")) if r]
    return f"no consumer read offset {o} of {p} at all" + (f"; the nearest reads were {' and '.join(around)}" if around else "")


def _written(ctx: dict[str, Any], verb: str = "acknowledged") -> str:
    done = ctx.get("completion") or {}
    where = f"at offset {ctx['offset']} of" if ctx.get("offset") is not None else "to"
    if done and done.get("type") == "info":  # counted as written because a read proved its txn committed
        return (f"value {ctx['value']} was sent {where} {ctx['partition']} in a txn that ended with an unknown "
                f"outcome {when(done)} (\"{_clip_error(done.get('error'))}\"), which a read of another of its "
                f"records proved committed{_leader_clause(ctx)} {faults_phrase(ctx)}")
    return (f"value {ctx['value']} was {verb} {where} {ctx['partition']} {when(done)}"
            f"{_leader_clause(ctx)} {faults_phrase(ctx)}")


def _unclean_clause(ctx: dict[str, Any]) -> str:
    """'; broker 3 was made leader of queue-0 by an unclean election at … (leader epoch 2, …), with
    its log of queue-0 loaded at log end offset 0 (…); 2 power cuts had struck it since the
    acknowledgement, at … dropping 6,539 bytes and 65 files it had not fsynced' (elections.py).
    A log created anew and a replaced disk are said as such."""
    said = []
    for e in ctx.get("unclean_elections") or []:
        at = when(e) if e.get("t_s") is not None else "at an unknown time"
        text = (f"broker {e['leader']} was made leader of {ctx.get('partition')} by an unclean election {at} "
                f"(leader epoch {e['epoch']}, recovery state RECOVERING: no in-sync or eligible replica was "
                f"there to elect; {e['file']} line {e['line']})")
        loaded = e.get("loaded")
        if loaded and loaded.get("created"):
            text += f", with its log of {ctx.get('partition')} created anew, empty ({loaded['file']} line {loaded['line']})"
        elif loaded:
            text += (f", with its log of {ctx.get('partition')} loaded at log end offset {loaded['log_end_offset']} "
                     f"({loaded['file']} line {loaded['line']})")
        held = e.get("others_held") or []
        if held:
            text += (f", while other replicas held {ctx.get('partition')} further: "
                     + ", ".join(f"broker {h['broker']} to offset {h['log_end_offset']:,} ({h['file']} line {h['line']})"
                                 for h in held))
        swaps = e.get("disk_swaps") or []
        if swaps:
            text += (f"; its data disk had been replaced since the acknowledgement, "
                     + ", ".join(when(d) for d in swaps))
        cuts = e.get("power_cuts")
        if cuts:
            drops = "; ".join(f"{when(d)} ({d.get('target') or 'one'}) dropping {d['dropped_bytes']:,} bytes and "
                              f"{d['dropped_files']} files it had not fsynced{_names_clause(d)}" for d in cuts["dropping"])
            n = cuts["count"]
            text += (f"; {n} power cut{'s' if n > 1 else ''} had struck it since the acknowledgement"
                     + (f", {drops}" if drops else ", none dropping anything"))
        said.append(text)
    return "; " + "; ".join(said) if said else ""


def _names_clause(drop: dict[str, Any]) -> str:
    """', among them /queue-1 (its name, never fsynced), /queue-1/00….log (gone with its directory, 80 bytes)'."""
    said = []
    for n in drop.get("partition_names") or []:
        what = {"entry": "its name, never fsynced", "vanished": f"gone with its directory, {n['bytes']:,} bytes",
                "bytes": f"{n['bytes']:,} bytes not fsynced", "restored": "a removal undone"}.get(n["what"], n["what"])
        said.append(f"{n['path']} ({what})")
    return f", among them {', '.join(said)}" if said else ""


def _client_clause(ctx: dict[str, Any]) -> str:
    """'; while it was in flight its producer's messages timed out locally (…) and its epoch rose from
    0 to 89 (…): librdkafka re-sends …' (producer_evidence: the client's side of a duplicate)."""
    client = ctx.get("client") or {}
    said = []
    if client.get("refused_batch"):
        said.append("a broker refused an out-of-order batch of its producer")
    if client.get("timed_out_s") is not None:
        said.append(f"its producer's messages timed out locally ({TIMED_OUT}, first at t={client['timed_out_s']:.3f} s)")
    bump = client.get("epoch_bump")
    if bump:
        said.append(f"its producer's epoch rose from {bump['from']} to {bump['to']} (first seen at t={bump['at_s']:.3f} s)")
    if not said:
        return ""
    return (f"; while it was in flight {' and '.join(said)}: librdkafka then re-sends in-flight batches under a bumped "
            "epoch, and the broker cannot tell them from new ones (librdkafka #4953)")


def clip(text: str, limit: int) -> tuple[str, str]:
    """(head, rest): `text` cut at the last space before `limit` (never inside a word, unless one
    word is longer than the limit); rest is empty when it fits."""
    if len(text) <= limit:
        return text, ""
    cut = text.rfind(" ", 0, limit + 1)
    if cut <= limit // 3:  # one long token (a path, a set of ids): cut at the limit
        cut = limit
    return text[:cut].rstrip(), text[cut:].lstrip()


def _clip_error(error: Any, limit: int = 120) -> str:
    head, rest = clip(str(error or "no error recorded"), limit)
    return head + (" …" if rest else "")


def sentence(ctx: dict[str, Any]) -> str:
    name, p, o = ctx["anomaly"], ctx.get("partition"), ctx.get("offset")
    mr = ctx.get("max_read") or {}
    reads = ctx.get("read_at_offset") or []
    at = ctx.get("at") or {}
    first = {"t_s": at.get("from_s"), "utc": at.get("from_utc")} if at.get("from_s") is not None else None
    if name == "lost-write":
        window = ctx.get("faults_after_s") or 0
        return (f"{_written(ctx)}; consumers later read {p} up to offset {mr.get('offset')} and never returned it; "
                f"{_read_elsewhere(ctx)}{_unclean_clause(ctx)}{after_phrase(ctx, f'within {window:g} s of its acknowledgement')}.")
    if name == "unseen":
        past = (f"no consumer read {p} past offset {mr['offset']} (last {when(mr)[3:]})" if mr
                else f"no consumer read {p} at all")
        if ctx.get("drain_complete"):
            return f"{_written(ctx)}; {past}, and the final drain read every partition to its end: it is lost."
        return f"{_written(ctx)}; {past}, so it is lost only if the final drain reached the high watermark."
    if name == "inconsistent-offsets":
        seen = " and as ".join(f"value {r['value']} ({_epoch(r)}, by process {r['process']} {when(r)})" for r in reads)
        acked = " and ".join(f"value {a['value']} {when(a)}" for a in ctx.get("acked_at_offset") or [])
        acked = f"was acknowledged to a producer for {acked}, " if acked else ""
        read = f"was read as {seen}" if seen else "was never read"
        between = after_phrase(ctx, "between the acknowledgements") if len(ctx.get("acked_at_offset") or []) > 1 else ""
        return (f"offset {o} of {p} {acked}{read}; the writes there were acknowledged {faults_phrase(ctx)}"
                f"{_unclean_clause(ctx)}{between}.")
    if name == "duplicate":
        where = ", ".join(str(x.get("offset")) for x in ctx.get("positions") or []) or str(o)
        done = ctx.get("completion")
        sent = (f": sent by process {ctx['invoke']['process']} {when(ctx['invoke'])}" if ctx.get("invoke") else
                ": its send" if done else ", and no send of it is in the history")
        acked = f" completed {done['type']} at offset {done.get('offset')} {when(done)}" if done else ""
        return (f"value {ctx['value']} was found at more than one position of {p} (offsets {where}){sent}{acked}, "
                f"{faults_phrase(ctx)}{_client_clause(ctx)}.")
    if name == "nonmonotonic-send":
        vs, os_ = ctx.get("values") or [None, ctx.get("value")], ctx.get("offsets") or [None, o]
        return (f"process {ctx.get('process')} sent value {vs[0]} then value {vs[-1]} to {p}, but value {vs[-1]} "
                f"was acknowledged at offset {os_[-1]} {when(ctx.get('completion'))}, not after value {vs[0]}'s "
                f"offset {os_[0]}, {faults_phrase(ctx)}.")
    if name in ("nonmonotonic-poll", "poll-skip"):
        os_ = ctx.get("offsets") or [None, o]
        skip = (f", skipping offset {ctx['skipped_offset']}, which another read returned"
                if ctx.get("skipped_offset") is not None else "")
        order = "then" if name == "poll-skip" else "then, not after it,"
        # The second read may be a txn's that aborted or ended unknown: it is held to the order all
        # the same (a consumer that does not rewind after an abort shows so).
        inside = {"fail": " inside a txn that aborted", "info": " inside a txn whose outcome is unknown"}.get(
            ctx.get("read_outcome"), "")
        group = (", across a group rebalance (which restarts the consumer at the group's committed offset)"
                 if ctx.get("across_rebalance") else "")
        return (f"process {ctx.get('process')} read {p} at offset {os_[0]} {order} at offset {os_[-1]}{inside} "
                f"{when(first)}{skip}{group}, {faults_phrase(ctx)}.")
    if name == "aborted-read":
        done = ctx.get("completion") or {}
        err = f" ({done['error']})" if done.get("error") else ""
        r = reads[0] if reads else None
        got = (f"process {r['process']} read it at offset {o} of {p} {when(r)}" if r
               else f"it was read at offset {o} of {p}")
        how = {"fail": "failed", "info": "ended unknown (info)"}.get(done.get("type"), "failed")
        return f"value {ctx['value']}'s {done.get('f', 'write')} {how} {when(done)}{err}, yet {got}, {faults_phrase(ctx)}."
    return f"{name} at offset {o} of {p} {when(first)}, {faults_phrase(ctx)}."


def first_examples(results: dict[str, Any]) -> str:
    """What `check` prints after its summary: each anomaly's first example, explained."""
    ex = ((results.get("explanations") or {}).get("examples") or {})
    lines = []
    for name in [*FIRST, *(n for n in ANOMALIES if n not in FIRST), *(n for n in ex if n not in ANOMALIES)]:
        first = (ex.get(name) or [None])[0]
        if first and first.get("sentence"):
            lines.append(f"first {name}: {first['sentence']}")
    clock = (results.get("explanations") or {}).get("clock") or {}
    if lines and not clock.get("exact", True):
        lines.append(f"(UTC times are estimated: {clock.get('source')})")
    return "".join(line + "\n" for line in lines)
