"""Finalizing a rolling upgrade: Kafka's feature levels (metadata.version and friends).

Kafka's FeatureCommand (`kafka-features`), run from the new version's jars inside a live node
(harness/cluster/versions.py mounts them): `version-mapping` names that release's feature levels,
`upgrade --feature` asks the controller for them, and `describe` reads what it finalized. A refusal
(a registered broker that does not support a level, for one) is Kafka's answer, returned as it is.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from harness.cluster.broker_config import INTERNAL_PORT
from harness.cluster.leadership import run_tool
from harness.cluster.versions import UPGRADE_LIBS, Upgrade

if TYPE_CHECKING:
    from harness.cluster.node import Node

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
# The features a rolling upgrade finalizes (issue 36), where the new version has them.
FINALIZED = ("metadata.version", "transaction.version", "eligible.leader.replicas.version")
# Why a finalize is asked in two stages when the one request is refused for a feature a broker "does not
# support": a broker on B that registered through a controller older than 3.9 (BrokerRegistrationRequest
# below v4) leaves out of its registration every feature whose lowest level is 0 (KAFKA-17492), so the
# controller knows it for metadata.version alone. From 3.3.2 to 4.4.0 (20261127T023704-73c52b) brokers 2
# and 3 registered through 3.3.2's controller as `features=[metadata.version 7-33]`, broker 1 later through
# 4.4.0's with all seven, and Kafka refused the finalize: "Invalid update version 2 for feature
# transaction.version. Broker 2 does not support this feature." Raising metadata.version alone makes such a
# broker register again (4.4.0's BrokerRegistrationTracker: when the new level supports log directories and
# its registration lists none, which a registration through a controller older than 3.7 never does);
# the other features are then asked again, a few times, while the brokers register.
MISSING = "does not support this feature"
RETRY_S = (3.0, 3.0, 5.0, 5.0)  # seconds before each new ask for the others: about 16 s, plus the tool's JVMs


# --- features --------------------------------------------------------------------------------------
def feature_tool(via: "Node", bootstrap: str, args: str) -> tuple[int, str]:
    """B's FeatureCommand inside `via` (a live node), against `bootstrap`; its exit code and output."""
    return run_tool(via, FEATURE_COMMAND, f"--bootstrap-server {bootstrap} {args}" if bootstrap else args, libs=UPGRADE_LIBS)


def bootstrap_of(brokers: list["Node"]) -> str:
    return ",".join(f"{b.hostname}:{INTERNAL_PORT}" for b in brokers)


def release(version: str) -> str:
    """'4.4.0' -> '4.4', the release FeatureCommand's version-mapping takes."""
    return ".".join(version.split(".")[:2])


def parse_mapping(output: str) -> dict[str, int]:
    """version-mapping's `name=level` lines ('metadata.version=33 (4.4)') -> name -> level."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^([a-z][\w.]*)=(\d+)", output, re.MULTILINE)}


def parse_describe(output: str) -> dict[str, str]:
    """describe's lines -> feature -> its finalized level as printed ('4.1-IV1' for metadata.version, '2' for others)."""
    return {m[1]: m[2] for m in re.finditer(r"Feature:\s*(\S+).*?FinalizedVersionLevel:\s*(\S+)", output)}


def wanted_levels(mapping: dict[str, int], finalized: dict[str, str]) -> dict[str, int]:
    """The FINALIZED features B names, at B's level: metadata.version always, the others where B's level
    is above the finalized one (asking a feature for its own level again is no upgrade)."""
    wanted = {}
    for name in FINALIZED:
        if name not in mapping:
            continue
        now = finalized.get(name)
        if name == "metadata.version" or now is None or not now.isdigit() or int(now) < mapping[name]:
            wanted[name] = mapping[name]
    return wanted


def finalize(upgrade: Upgrade, via: "Node", brokers: list["Node"]) -> dict[str, Any]:
    """Ask for B's feature levels (FeatureCommand upgrade) and read back what was finalized. Returns
    what Kafka answered at each step: `before` and `after` (describe), `wanted`, `exit` and `answer`
    of the upgrade, `refused` when it exited non-zero. Never raises for Kafka's refusal."""
    bootstrap = bootstrap_of(brokers)
    code, mapped = feature_tool(via, "", f"version-mapping --release-version {release(upgrade.target.version)}")
    mapping = parse_mapping(mapped)
    _, described = feature_tool(via, bootstrap, "describe")
    before = parse_describe(described)
    wanted = wanted_levels(mapping, before)
    out: dict[str, Any] = {"via": via.node_id, "release": release(upgrade.target.version), "mapping": mapping,
                           "before": before, "wanted": wanted}
    if code != 0 or not wanted:
        out.update(exit=code, answer=(mapped or described).strip()[-1500:], refused=True)
        return out
    args = "upgrade " + " ".join(f"--feature {name}={level}" for name, level in wanted.items())
    code, answer = feature_tool(via, bootstrap, args)
    out.update(command=args, exit=code, answer=answer.strip()[-1500:])
    if code != 0 and MISSING in answer and "metadata.version" in wanted and len(wanted) > 1:
        out["staged"] = staged(via, bootstrap, wanted)
        out["metadata_finalized"] = out["staged"][0]["exit"] == 0
        code = out["staged"][-1]["exit"]
    if code != 0:
        out["refused"] = True
    _, described = feature_tool(via, bootstrap, "describe")
    out["after"] = parse_describe(described)
    return out


def staged(via: "Node", bootstrap: str, wanted: dict[str, int]) -> list[dict[str, Any]]:
    """metadata.version alone, then the other wanted features, asked again up to len(RETRY_S) times while
    Kafka still says a broker does not support one (see MISSING). Every ask is returned with Kafka's answer."""
    def ask(args: str) -> dict[str, Any]:
        code, answer = feature_tool(via, bootstrap, args)
        return {"command": args, "exit": code, "answer": answer.strip()[-1500:], "at": round(time.monotonic() - began, 1)}

    began = time.monotonic()
    asks = [ask(f"upgrade --feature metadata.version={wanted['metadata.version']}")]
    if asks[0]["exit"] != 0:
        return asks
    rest = "upgrade " + " ".join(f"--feature {name}={level}" for name, level in wanted.items() if name != "metadata.version")
    for pause in RETRY_S:
        time.sleep(pause)
        asks.append(ask(rest))
        if asks[-1]["exit"] == 0 or MISSING not in asks[-1]["answer"]:
            break
    return asks
