"""Node.pid() answers from `ps` in the container, and a failed exec is not an answer: a detection
run at load ~18 was failed "exited during start-up" while that broker still logged."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.cluster.broker_config import NodeSpec
from harness.cluster.node import Node


class _Container:
    def __init__(self, replies: list[tuple[int, str]]) -> None:
        self.replies, self.calls = list(replies), 0

    def get_wrapped_container(self) -> "_Container":
        return self

    def exec_run(self, cmd: list[str]) -> SimpleNamespace:
        self.calls += 1
        code, out = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return SimpleNamespace(exit_code=code, output=out.encode())


def _node(tmp_path: Path, replies: list[tuple[int, str]]) -> Node:
    (tmp_path / "kafka.pid").write_text("36\n")
    spec = NodeSpec(node_id=2, hostname="kafka-2", roles=("broker", "controller"))
    return Node(spec=spec, container=_Container(replies), node_dir=tmp_path)  # type: ignore[arg-type]


def test_a_running_jvm_is_its_pid(tmp_path):
    assert _node(tmp_path, [(0, "Sl\n")]).pid() == 36


def test_no_such_process_and_a_zombie_are_not_running(tmp_path):
    assert _node(tmp_path, [(1, "")]).pid() is None
    assert _node(tmp_path, [(0, "Z\n")]).pid() is None


def test_a_failed_exec_is_asked_again(tmp_path):
    node = _node(tmp_path, [(126, "OCI runtime exec failed"), (0, "S\n")])
    assert node.pid() == 36 and node.container.calls == 2


def test_an_exec_that_never_answers_proves_no_death(tmp_path):
    node = _node(tmp_path, [(126, "OCI runtime exec failed")])
    assert node.pid() == 36 and node.container.calls == 3
    assert node.last_ps == (126, "OCI runtime exec failed")


def test_an_empty_answer_is_asked_again(tmp_path):
    """ps exits 1 for no such process; exit 0 with no state came only from a strained exec (load 41)."""
    node = _node(tmp_path, [(0, ""), (0, "Sl\n")])
    assert node.pid() == 36 and node.container.calls == 2


def test_a_start_whose_exec_answers_nothing_reads_the_pid_the_script_wrote(tmp_path):
    # Today's soak at load ~15: docker exec of start.sh answered exit 0 with no output, and the
    # kill nemesis's stop failed with "list index out of range", leaving the broker down.
    assert _node(tmp_path, [(0, "")]).start_process() == 36
    assert _node(tmp_path, [(0, "41\n")]).start_process() == 41


def test_a_start_with_no_pid_anywhere_is_a_cluster_error_not_an_index_error(tmp_path):
    import pytest

    from harness.errors import HarnessError

    node = _node(tmp_path, [(0, "")])
    (tmp_path / "kafka.pid").write_text("")
    with pytest.raises(HarnessError, match="gave no PID"):
        node.start_process()


def test_the_start_script_treats_a_zombie_jvm_as_gone(tmp_path):
    """A SIGKILLed JVM that tini has not reaped yet still answers kill -0; the start script's running
    check must not, or a restart right after a kill starts nothing (a roll left a broker down 93 s).
    The check is run as the script has it, on this host, against a real zombie."""
    import subprocess
    import time

    from harness.cluster.node import START_SCRIPT

    check = next(line for line in START_SCRIPT.format(node_dir=".", libs="", archive="", log_opt="", faketime="", jvm_opts="", main="")
                 .splitlines() if line.startswith("if [ -s kafka.pid ]"))
    script = f"set -eu\n{check.replace('then cat kafka.pid; exit 0; fi', 'then echo running; exit 0; fi')}\necho gone\n"
    child = subprocess.Popen(["sleep", "0.05"])  # never waited for until the end: a zombie meanwhile
    time.sleep(0.5)
    (tmp_path / "kafka.pid").write_text(str(child.pid))
    assert subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True).stdout.strip() == "gone"
    child.wait()
    alive = subprocess.Popen(["sleep", "5"])
    try:
        (tmp_path / "kafka.pid").write_text(str(alive.pid))
        assert subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True, text=True).stdout.strip() == "running"
    finally:
        alive.kill()
        alive.wait()
