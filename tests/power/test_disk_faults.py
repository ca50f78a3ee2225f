"""Injected disk errors in the lossy layer by itself, no Kafka: while a fault is set the chosen
system calls fail with its errno; once cleared, the same calls succeed and nothing the refused
calls tried is on the disk (docs/disk.md)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from harness.errors import HarnessError

pytestmark = pytest.mark.skipif(not Path("/dev/fuse").exists() or os.geteuid() != 0,
                                reason="needs /dev/fuse and root (the helper mounts with mount(2))")

from harness.cluster.lossy_mount import DISK_ERRORS, LossyMount  # noqa: E402
from harness.provision import lossyfs as provision  # noqa: E402


@pytest.fixture
def disk(tmp_path: Path, request: pytest.FixtureRequest):
    label = "test:" + re.sub(r"[^\w-]", "_", request.node.name)  # a space would split the mount's options
    with LossyMount(tmp_path / "disk", label=label) as mount:
        yield mount
    assert provision.mounted(f"lossyfs:{label}") == [], "the mount outlived its context"


def append(path: Path, data: bytes, sync: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def refused(errno_: int, call, *args) -> bool:  # type: ignore[no-untyped-def]
    with pytest.raises(OSError) as caught:
        call(*args)
    return caught.value.errno == errno_


def test_the_helper_offers_the_presets_the_harness_uses(disk: LossyMount) -> None:
    assert sorted(disk.fault_presets()) == sorted(DISK_ERRORS)


def test_eio_on_writes_refuses_every_change_then_clearing_heals(disk: LossyMount) -> None:
    log = disk.mountpoint / "00000.log"
    append(log, b"before;", sync=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)  # held open across the fault, as Kafka holds its segments
    disk.fault("eio-write")
    try:
        assert refused(errno.EIO, os.write, fd, b"during;")
        assert refused(errno.EIO, os.fsync, fd)
        assert refused(errno.EIO, append, disk.mountpoint / "new.log", b"x")
        assert refused(errno.EIO, os.mkdir, disk.mountpoint / "topic-0")
        assert refused(errno.EIO, os.rename, log, disk.mountpoint / "renamed.log")
        assert refused(errno.EIO, os.truncate, log, 0)
        assert log.read_bytes() == b"before;", "reads still work on a disk whose writes fail"
        cleared = disk.clear_fault()
        assert cleared is not None and cleared["errno"] == "EIO" and cleared["name"] == "eio-write"
        assert cleared["injected"]["write"] >= 1 and cleared["injected"]["fsync"] >= 1
        assert cleared["injected"]["create"] == 1 and cleared["injected"]["mkdir"] == 1
        assert cleared["first_hit_s"] is not None and cleared["first_hit_s"] <= cleared["active_s"]

        os.write(fd, b"after;")
        os.fsync(fd)
    finally:
        os.close(fd)
    assert log.read_bytes() == b"before;after;"
    assert sorted(p.name for p in disk.mountpoint.iterdir()) == ["00000.log"]
    assert disk.clear_fault() is None, "a second clear finds a healthy disk"


def test_enospc_refuses_new_data_and_names_but_not_renames_and_statfs_says_full(disk: LossyMount) -> None:
    log = disk.mountpoint / "00000.log"
    append(log, b"kept;", sync=True)
    disk.fault("enospc")
    assert refused(errno.ENOSPC, append, log, b"more;")
    assert refused(errno.ENOSPC, append, disk.mountpoint / "00001.log", b"x")
    assert refused(errno.ENOSPC, os.mkdir, disk.mountpoint / "topic-1")
    os.rename(log, disk.mountpoint / "00000.log.deleted")  # needs no new block: still works
    fs = os.statvfs(disk.mountpoint)
    assert fs.f_bavail == 0 and fs.f_bfree == 0
    cleared = disk.clear_fault()
    assert cleared is not None and cleared["errno"] == "ENOSPC" and cleared["injected"]["write"] == 1
    assert os.statvfs(disk.mountpoint).f_bavail > 0
    append(disk.mountpoint / "00000.log.deleted", b"more;", sync=True)
    assert (disk.mountpoint / "00000.log.deleted").read_bytes() == b"kept;more;"


def test_eio_on_reads_reaches_a_file_whose_pages_were_cached(disk: LossyMount) -> None:
    log = disk.mountpoint / "00000.log"
    append(log, b"x" * 65536, sync=True)
    fd = os.open(log, os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == b"x" * 4096  # now in the kernel's page cache
        answer = disk.fault("eio-read")
        assert answer["page_cache_dropped_files"] >= 1
        assert refused(errno.EIO, os.pread, fd, 4096, 0), "a read served from the page cache never saw the fault"
        append(log, b"y", sync=True)  # writes are not refused by a read fault
        assert disk.clear_fault()["injected"]["read"] >= 1
        assert os.pread(fd, 4096, 0) == b"x" * 4096
    finally:
        os.close(fd)


def test_a_fault_limited_to_a_path_leaves_the_rest_of_the_disk_working(disk: LossyMount) -> None:
    (disk.mountpoint / "a-0").mkdir()
    (disk.mountpoint / "b-0").mkdir()
    disk.fault("EIO write,create", path="a-0")
    assert refused(errno.EIO, append, disk.mountpoint / "a-0" / "00.log", b"x")
    append(disk.mountpoint / "b-0" / "00.log", b"fine", sync=True)
    cleared = disk.clear_fault()
    assert cleared["path"] == "a-0" and cleared["ops"] == ["write", "create"] and cleared["injected"] == {"create": 1}


def test_a_fault_survives_a_power_cut_and_the_cut_keeps_only_what_was_synced(disk: LossyMount) -> None:
    log = disk.mountpoint / "00000.log"
    append(log, b"synced;", sync=True)
    os.fsync(os.open(disk.mountpoint, os.O_RDONLY))
    append(log, b"unsynced;")
    disk.fault("eio-write")
    dropped = disk.drop()
    assert dropped["dropped_bytes"] == len(b"unsynced;")
    assert log.read_bytes() == b"synced;"
    assert refused(errno.EIO, append, log, b"x"), "the disk is still failing after the cut"
    disk.clear_fault()
    append(log, b"again;")
    assert log.read_bytes() == b"synced;again;"


@pytest.mark.parametrize("command", ["fault", "fault EBOGUS write", "fault EIO scribble", "fault eio-write a b"])
def test_a_malformed_fault_is_refused_with_its_usage(disk: LossyMount, command: str) -> None:
    with pytest.raises(HarnessError) as caught:
        disk.command(command)
    assert "fault" in str(caught.value) or "unknown" in str(caught.value)
    assert disk.stats()["fault"] is None
