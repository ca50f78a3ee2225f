"""The lossy filesystem by itself, no Kafka: after a power loss, exactly what was synced remains.

Each test mounts a real lossyfs (native helper, FUSE) in a temporary folder, works through it
with ordinary system calls, cuts the power (`drop`) and reads back. The random test holds the
layer to a small independent model of the rules (docs/power.md): data is durable at fsync of
its file, a directory entry at fsync of its directory.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import random
import time
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.provision import lossyfs as provision

pytestmark = pytest.mark.skipif(not Path("/dev/fuse").exists() or os.geteuid() != 0,
                                reason="needs /dev/fuse and root (the helper mounts with mount(2))")

from harness.cluster.lossy_mount import LossyMount  # noqa: E402


@pytest.fixture
def disk(tmp_path: Path, request: pytest.FixtureRequest):
    label = f"test:{request.node.name}"
    with LossyMount(tmp_path / "disk", label=label) as mount:
        yield mount
    assert provision.mounted(f"lossyfs:{label}") == [], "the mount outlived its context"


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_at(path: Path, data: bytes, offset: int | None = None, sync: bool = False) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, os.fstat(fd).st_size if offset is None else offset)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_write_fsync_write_loss_keeps_only_the_first_write(disk: LossyMount) -> None:
    log = disk.mountpoint / "log"
    write_at(log, b"first;", sync=True)
    fsync_path(disk.mountpoint)
    write_at(log, b"second;")
    assert log.read_bytes() == b"first;second;"
    dropped = disk.drop()
    assert log.read_bytes() == b"first;"
    assert dropped["dropped_bytes"] == len(b"second;") and dropped["dropped_files"] == 1
    assert dropped["dropped_names"] == [{"path": "/log", "what": "bytes", "bytes": len(b"second;")}]
    assert dropped["dropped_names_more"] == 0


def test_unsynced_create_and_rename_are_undone(disk: LossyMount) -> None:
    root = disk.mountpoint
    write_at(root / "kept", b"synced", sync=True)
    fsync_path(root)
    write_at(root / "new", b"data synced, name not", sync=True)  # fsync of the file alone
    (root / "kept").rename(root / "renamed")
    assert sorted(p.name for p in root.iterdir()) == ["new", "renamed"]
    dropped = disk.drop()
    assert sorted(p.name for p in root.iterdir()) == ["kept"]
    assert (root / "kept").read_bytes() == b"synced"
    assert dropped["dropped_entries"] >= 2
    # Each name the cut undid: the two made since the root's fsync, the one renamed away; then
    # "new"'s data, synced but gone with its name (names first, then files, each by path).
    assert dropped["dropped_names"] == [{"path": "/new", "what": "entry", "bytes": 0},
                                        {"path": "/renamed", "what": "entry", "bytes": 0},
                                        {"path": "/kept", "what": "restored", "bytes": 0},
                                        {"path": "/new", "what": "vanished", "bytes": len(b"data synced, name not")}]


def test_a_directory_whose_name_was_never_fsynced_is_named_with_its_files(disk: LossyMount) -> None:
    """The campaign's seed 33: Kafka made a partition's directory and wrote into it, and a power cut
    took the directory's name (its parent was never fsynced). The drop names the directory; files
    under it vanish with it, each named with the bytes it held, synced or not."""
    root = disk.mountpoint
    (root / "data").mkdir()
    fsync_path(root)
    fsync_path(root / "data")
    (root / "data" / "queue-1").mkdir()
    write_at(root / "data" / "queue-1" / "00.log", b"synced data", sync=True)
    fsync_path(root / "data" / "queue-1")
    dropped = disk.drop()
    assert not (root / "data" / "queue-1").exists()
    assert dropped["dropped_names"] == [{"path": "/data/queue-1", "what": "entry", "bytes": 0},
                                        {"path": "/data/queue-1/00.log", "what": "vanished", "bytes": len(b"synced data")}]


def test_directory_fsync_makes_names_durable_but_not_data(disk: LossyMount) -> None:
    root = disk.mountpoint
    write_at(root / "a", b"never fsynced")
    (root / "sub").mkdir()
    fsync_path(root)
    disk.drop()
    assert (root / "a").read_bytes() == b""  # its name reached the disk, its data did not
    assert (root / "sub").is_dir()


def test_unsynced_unlink_is_undone(disk: LossyMount) -> None:
    root = disk.mountpoint
    (root / "d").mkdir()
    write_at(root / "d" / "f", b"precious", sync=True)
    fsync_path(root / "d")
    fsync_path(root)
    (root / "d" / "f").unlink()
    (root / "d").rmdir()
    disk.drop()
    assert (root / "d" / "f").read_bytes() == b"precious"


def test_mmap_writes_are_durable_at_msync_only(disk: LossyMount) -> None:
    path = disk.mountpoint / "index"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 8192)
    os.fsync(fd)
    fsync_path(disk.mountpoint)
    with mmap.mmap(fd, 8192) as view:
        view[0:5] = b"synced"[:5]
        view.flush()  # msync: the kernel writes the page back and fsyncs
        view[4096:4101] = b"lost!"  # written, never synced: a power cut takes it
    os.close(fd)
    disk.drop()
    data = path.read_bytes()
    assert len(data) == 8192 and data[0:5] == b"synce" and data[4096:4101] == b"\0" * 5


def test_truncate_and_fallocate_are_undone(disk: LossyMount) -> None:
    path = disk.mountpoint / "seg"
    original = bytes(range(256)) * 40
    write_at(path, original, sync=True)
    fsync_path(disk.mountpoint)
    os.truncate(path, 100)
    fd = os.open(path, os.O_RDWR)
    os.posix_fallocate(fd, 0, 20000)  # grows the file past its synced size
    os.close(fd)
    assert path.stat().st_size == 20000
    disk.drop()
    assert path.read_bytes() == original
    # A hole punched in synced data is undone as well.
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDWR)
    punch = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
    assert libc.fallocate(fd, punch, ctypes.c_long(4096), ctypes.c_long(4096)) == 0, os.strerror(ctypes.get_errno())
    os.close(fd)
    assert path.read_bytes()[4096:8192] == b"\0" * 4096
    disk.drop()
    assert path.read_bytes() == original


def test_dropped_bytes_count_written_data_not_reserved_space(disk: LossyMount) -> None:
    index = disk.mountpoint / "00000000000000000000.index"
    write_at(index, b"")
    fsync_path(disk.mountpoint)
    os.truncate(index, 10 * 1024 * 1024)  # as Kafka sizes an index up front
    write_at(index, b"12345678", 0)
    dropped = disk.drop()
    assert dropped["dropped_bytes"] == 8 and dropped["dropped_files"] == 1
    assert index.stat().st_size == 0


def test_writeback_window_models_the_kernel_flushing(tmp_path: Path) -> None:
    with LossyMount(tmp_path / "disk", label="test:writeback", writeback_s=0.3) as disk:
        write_at(disk.mountpoint / "old", b"flushed by the kernel")
        time.sleep(1.0)
        write_at(disk.mountpoint / "old", b"+young")
        dropped = disk.drop()
        assert (disk.mountpoint / "old").read_bytes() == b"flushed by the kernel"
        assert dropped["dropped_bytes"] == len(b"+young")


class Model:
    """The rules, independently: file contents by identity; names per directory; a live and a
    synced copy of each."""

    def __init__(self) -> None:
        self.live: dict[int, bytearray] = {}
        self.synced: dict[int, bytes] = {}
        self.names: dict[str, dict[str, int]] = {".": {}, "sub": {}}
        self.synced_names: dict[str, dict[str, int]] = {".": {}, "sub": {}}
        self.next_id = 0

    def expected(self) -> dict[str, bytes]:
        return {f"{d}/{n}": self.synced.get(i, b"") for d, entries in self.synced_names.items() for n, i in entries.items()}

    def sync_dir(self, d: str) -> None:
        """A directory's names become durable; a rename from or to another directory goes with
        them whole (one durable name per file, as a journal commits a rename at once)."""
        old, new = self.synced_names[d], dict(self.names[d])
        self.synced_names[d] = new
        for other, entries in self.synced_names.items():
            if other != d:
                self.synced_names[other] = {n: i for n, i in entries.items() if i not in new.values()}
        for i in set(old.values()) - set(new.values()):
            for other, entries in self.names.items():
                for n, j in entries.items():
                    if j == i and other != d:
                        self.synced_names[other][n] = i

    def after_drop(self) -> None:
        self.live = {i: bytearray(self.synced.get(i, b"")) for d in self.synced_names.values() for i in d.values()}
        self.names = {d: dict(e) for d, e in self.synced_names.items()}


def tree(root: Path) -> dict[str, bytes]:
    out = {}
    for d in (".", "sub"):
        for p in (root / d).iterdir():
            if p.is_file():
                out[f"{d}/{p.name}"] = p.read_bytes()
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_read_back_as_at_the_last_sync(disk: LossyMount, seed: int) -> None:
    rng, model, root = random.Random(seed), Model(), disk.mountpoint
    (root / "sub").mkdir()
    fsync_path(root)
    for step in range(400):
        d = rng.choice([".", "sub"])
        entries = model.names[d]
        op = rng.choice(["create", "write", "write", "append", "truncate", "fsync", "fsync", "rename", "unlink", "fsyncdir", "drop"]
                        if entries else ["create", "fsyncdir"])
        name = rng.choice(sorted(entries)) if entries else None
        if op == "create":
            new = f"f{rng.randrange(8)}"
            if new in entries:
                continue
            write_at(root / d / new, b"")
            model.next_id += 1
            entries[new] = model.next_id
            model.live[model.next_id] = bytearray()
        elif op in ("write", "append"):
            content = model.live[entries[name]]
            offset = len(content) if op == "append" else rng.randrange(len(content) + 1)
            data = rng.randbytes(rng.randrange(1, 300))
            write_at(root / d / name, data, offset)
            content[offset:offset + len(data)] = data
        elif op == "truncate":
            size = rng.randrange(len(model.live[entries[name]]) + 50)
            os.truncate(root / d / name, size)
            content = model.live[entries[name]]
            del content[size:]
            content.extend(b"\0" * (size - len(content)))
        elif op == "fsync":
            fsync_path(root / d / name)
            model.synced[entries[name]] = bytes(model.live[entries[name]])
        elif op == "rename":
            to_dir = rng.choice([".", "sub"])
            to = f"f{rng.randrange(8)}"
            (root / d / name).rename(root / to_dir / to)
            model.names[to_dir][to] = entries.pop(name)
        elif op == "unlink":
            (root / d / name).unlink()
            del entries[name]
        elif op == "fsyncdir":
            fsync_path(root / d)
            model.sync_dir(d)
        elif op == "drop":
            disk.drop()
            model.after_drop()
            assert tree(root) == model.expected(), f"seed {seed}, step {step}: the tree after a drop is not the synced one"
            model.synced = {i: bytes(c) for i, c in model.live.items()}
        live = {f"{dd}/{n}": bytes(model.live[i]) for dd, e in model.names.items() for n, i in e.items()}
        seen = tree(root)
        assert seen == live, f"seed {seed}, step {step}, after {op} {d}/{name}: the live tree differs from the model: " + str({k: (len(seen.get(k, b"")), len(live.get(k, b"")), seen.get(k) == live.get(k)) for k in set(seen) | set(live)})
    disk.drop()
    model.after_drop()
    assert tree(root) == model.expected()


def test_a_failure_inside_the_block_still_unmounts(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with LossyMount(tmp_path / "disk", label="test:failure") as disk:
            raise RuntimeError("boom")
    assert provision.mounted("lossyfs:test:failure") == []
    assert disk.process is None


def test_cleanup_unmounts_what_a_killed_owner_left(tmp_path: Path) -> None:
    disk = LossyMount(tmp_path / "disk", label="test-run-x:kafka-1").mount()
    disk.process = None  # as if the harness that owned it had been SIGKILLed
    assert provision.unmount_leftovers("test-run-x") == [str(disk.mountpoint)]
    assert provision.mounted("lossyfs:test-run-x:") == []


def test_no_fuse_device_is_refused_with_its_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provision, "FUSE_DEVICE", Path("/dev/no-such-fuse"))
    with pytest.raises(HarnessError) as caught:
        provision.check_fuse()
    assert "/dev/fuse" in caught.value.message and "modprobe fuse" in caught.value.hint
