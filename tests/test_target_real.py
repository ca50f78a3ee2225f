"""A real target (issue 37): `cluster up`'s standing cluster, reached over SSH, its clients on SASL_SSL with
SCRAM, its certificate signed by the CA made for it. One cluster for the module; `cluster down` at the end.

- a wrong SSH key, a wrong SASL password and an unknown CA each exit 2 before any run directory exists;
- a faulted run is checked and reported, deletes its topic, and no password or key is anywhere in its run directory;
- SIGKILL of the harness during a partition, then `cleanup --target`: no rule, no marker, every broker up.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from analysis.reference import checker as reference
from harness.history.files import read_history
from harness.target.cluster import TargetCluster
from harness.target.leftovers import SURVEY, parse, survey
from harness.target.spec import load_target

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def standing() -> Iterator[Path]:
    from harness.target.standing import down, up

    path = up(3)
    try:
        yield path
    finally:
        down(str(path.parent))
        assert not path.parent.exists()  # the keys, the CA and the passwords go with it


def harness(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "KAFKA_HARNESS_RUN_DEFAULTS": ""}, **kwargs)  # type: ignore[call-overload]
    done.stderr = " ".join(done.stderr.split())  # rich wraps lines at the terminal's width
    return done


def variant(standing: Path, tmp_path: Path, name: str, old: str, new: str) -> Path:
    """The standing target file with its relative paths made absolute and `old` replaced by `new`."""
    text = standing.read_text()
    assert old in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace(old, new, 1).replace('"secrets/', f'"{standing.parent}/secrets/'))
    return path


def test_a_wrong_key_password_or_ca_exits_2_before_any_workload(standing: Path, tmp_path: Path) -> None:
    key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "other.key"),
                    "-out", str(tmp_path / "other-ca.pem"), "-days", "1", "-subj", "/CN=another CA"], check=True, capture_output=True)
    (tmp_path / "wrong-password").write_text("not-the-password\n")
    cases = {
        "key": ('"secrets/id_ed25519"', f'"{key}"', "SSH refused the key"),
        "password": ('"secrets/scram-password"', f'"{tmp_path / "wrong-password"}"', "refused the SASL credentials of user 'harness'"),
        "ca": ('"secrets/ca.pem"', f'"{tmp_path / "other-ca.pem"}"', "the TLS handshake failed"),
    }
    for name, (old, new, says) in cases.items():
        path = variant(standing, tmp_path, name, old, new)
        store = tmp_path / f"store-{name}"
        began = time.monotonic()
        done = harness("run", "--target", str(path), "--allow-faults", "--nemesis", "kill", "--store", str(store),
                       "--no-check", timeout=120)
        assert done.returncode == 2, (name, done.stderr)
        assert says in done.stderr and "hint:" in done.stderr, (name, done.stderr)
        assert not store.exists() or not any(store.iterdir()), f"{name}: a run directory was made"
        assert time.monotonic() - began < 30


def secrets_of(folder: Path) -> dict[str, bytes]:
    """Every secret of the standing cluster: passwords, and each private key's body lines."""
    found = {"scram password": (folder / "scram-password").read_bytes().strip(),
             "keystore password": (folder / "keystore-password").read_bytes().strip()}
    for key in ("id_ed25519", "ca.key", "broker.key", "node-1/ssh_host_ed25519_key"):
        lines = [line for line in (folder / key).read_text().splitlines() if line and "-----" not in line]
        found.update({f"{key} line {i}": line.encode() for i, line in enumerate(lines) if len(line) >= 20})
    return found


def test_a_faulted_run_over_sasl_ssl_is_checked_and_keeps_no_secret(standing: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = harness("run", "--target", str(standing), "--allow-faults", "--nemesis", "kill,partition,pause,roll",
                   "--time-limit", "20", "--nemesis-interval", "5", "--store", str(store), timeout=900)
    # Valid, or librdkafka's known duplicates (README); or unknown with nothing acknowledged: in a
    # CI run (2026-11-29, load from the suite) the controller was killed 2.6 s in, while both
    # idempotent producers still waited for their PID ("Coordinator load in progress"), and kills,
    # a pause and a roll kept the cluster down for the rest of the 20 s: 200,000 sends unresolved,
    # an unknown outcome, never a failure. Whatever the verdict, the rest below must hold.
    assert done.returncode in (0, 1, 3), done.stderr
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    assert (run_dir / "results.json").exists() and (run_dir / "report.html").exists()
    results = json.loads((run_dir / "results.json").read_text())
    if done.returncode == 3:
        assert results["verdict"] == "unknown" and results["reasons"][0].startswith("nothing acknowledged"), results["reasons"]
    if results["verdict"] == "valid":  # the reference checker (plain Python, no shared code) agrees
        events = read_history(run_dir / "history.jsonl")
        assert len(events) > 1000 and {k: v for k, v in reference.counts(events).items() if v} == {}
    assert "TLS certificates verified" in (run_dir / "report.html").read_text()
    logs = sorted(run_dir.glob("brokers/*/server.log"))
    assert len(logs) == 3 and all(log.stat().st_size > 0 for log in logs)  # the grep below reads the brokers' logs too
    target = load_target(standing)
    record = (run_dir / "config.json").read_text()
    topic = re.search(r'"topic": "([^"]+)"', record)
    assert topic and topic.group(1) == f"kafka-harness-{run_dir.name}"
    assert f'"{topic.group(1)}": "deleted"' in record
    with TargetCluster(target) as cluster:
        assert topic.group(1) not in cluster.admin().list_topics(timeout=20).topics
        assert survey(cluster) == []  # every fault healed, every marker gone
        assert all(node.pid() is not None for node in cluster.brokers), {n.node_id: n.pid() for n in cluster.brokers}
    secrets = secrets_of(standing.parent / "secrets")
    assert len(secrets) > 10
    for path in [p for p in run_dir.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        leaked = [name for name, secret in secrets.items() if secret in data]
        assert not leaked, f"{path} holds {leaked}"


def look(cluster: TargetCluster) -> tuple[list, float]:
    """Every host's leftovers, and how long the look took; a host that does not answer fails the
    test (leftovers.survey skips it, and a skipped host would read as a healed one)."""
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(cluster.brokers)) as pool:
        answers = list(pool.map(lambda node: (node.node_id, *node.exec(SURVEY)), cluster.brokers))
    for node_id, code, out in answers:
        assert code == 0, f"broker {node_id}'s host did not answer the survey: {out[-500:]}"
    return [f for node_id, _, out in answers for f in parse(node_id, out)], time.monotonic() - began


def nemesis_events(store: Path) -> list[str]:
    """The killed run's fault events as its history kept them (durable, line by line; read_history
    drops a line the kill tore)."""
    events = [e for run in store.iterdir() for e in read_history(run / "history.jsonl")]
    return [f"{e['time'] / 1e9:.1f}s {e['f']}" for e in events if e.get("process") == "nemesis" and e.get("f") != "observed"]


def test_sigkill_during_a_partition_then_cleanup_target_leaves_nothing(standing: Path, tmp_path: Path) -> None:
    target = load_target(standing)
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", "--target", str(standing), "--allow-faults",
                            "--nemesis", "partition,pause", "--nemesis-interval", "10", "--time-limit", "120",
                            "--store", str(tmp_path / "store"), "--no-check"], cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=(tmp_path / "stderr").open("w"), env={**os.environ, "KAFKA_HARNESS_RUN_DEFAULTS": ""})
    began, seen, killed = time.monotonic(), [], False
    try:
        with TargetCluster(target) as cluster:
            before, before_took = [], 99.0
            while time.monotonic() < began + 150:
                assert run.poll() is None, f"the run ended before a partition was seen: {(tmp_path / 'stderr').read_text()[-1500:]}"
                found, took = look(cluster)
                seen.append(f"{time.monotonic() - began:.1f}s: {len(found)} in {took:.1f}s")
                # Killed on a cut's first sighting, when this look and the one before it (which saw no
                # rule) took under 4 s together: the cut is then under ~4.3 s old, and a cut lasts 5-15 s
                # (the interval's GAP_RANGE), so its heal cannot be under way. CI, 2026-11-28: a kill
                # found nothing left; the cause went unseen, so the message now carries the looks and
                # the killed run's faults.
                fresh = not any(f.kind == "rule" for f in before) and before_took + took < 4
                if fresh and any(f.kind == "rule" for f in found):
                    run.send_signal(signal.SIGKILL)  # at once
                    killed = True
                    break
                before, before_took = found, took
                time.sleep(0.3)
            assert killed, f"no fresh sighting of a partition rule within 150 s: {seen[-20:]}"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    run_id = next((tmp_path / "store").iterdir()).name
    with TargetCluster(target) as cluster:
        left, _ = look(cluster)
        assert left and {f.run_id for f in left} == {run_id}, (  # every rule and marker carries the killed run's id
            f"left {[f.describe() for f in left]}; looks {seen[-10:]}; faults {nemesis_events(tmp_path / 'store')[-12:]}")
    done = harness("cleanup", "--target", str(standing), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("healed broker") == len(left), done.stdout
    with TargetCluster(target) as cluster:
        assert survey(cluster) == []
        assert all(node.pid() is not None for node in cluster.brokers)
        for node in cluster.brokers:
            code, rules = node.exec("iptables -w -S | grep KH_ || true")
            assert code == 0 and rules.strip() == "", rules
            assert node.exec("ps -o stat= -p $(cat /opt/harness/node/kafka.pid)")[1].strip()[:1] != "T"  # not paused
    done = harness("cleanup", "--target", str(standing), timeout=120)
    assert done.returncode == 0 and "nothing left" in done.stdout
