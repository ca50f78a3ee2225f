"""What the lossy layer costs: the same file workloads on a plain directory, on lossyfs, and
(optionally) on a Python FUSE passthrough, side by side in one run.

    python bench/bench_lossyfs.py [--rounds 3] [--mib 64] [--python-fuse /path/to/python-with-fusepy]

Workloads, shaped like a Kafka log directory:
- append: 4 KiB appends, an fsync every MiB (a broker's segment writes plus its periodic flush);
- append-nosync: the same with no fsync at all (Kafka's default: the page cache only);
- fsync-each: 1 KiB appends, each fsynced (the `fsync` profile, log.flush.interval.messages=1);
- files: create, write 1 KiB, fsync, rename, fsync the directory (checkpoint files).
Every target sits on the same backing filesystem. Rounds alternate the targets' order, and the
figure is each target's median over the rounds with its ratio to the plain directory. lossyfs passes
fsyncs through to the backing files, so an fsync costs there what it costs on the disk. The Python
column is a bare passthrough with no loss tracking at all: a lower bound on a Python layer's cost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cluster.lossy_mount import LossyMount  # noqa: E402
from harness.provision.lossyfs import unmount  # noqa: E402

PASSTHROUGH = r'''
import os, sys, errno
from fuse import FUSE, FuseOSError, Operations
root = sys.argv[1]
def p(path): return os.path.join(root, path.lstrip("/"))
class Pass(Operations):
    def getattr(self, path, fh=None):
        try: st = os.lstat(p(path))
        except OSError as e: raise FuseOSError(e.errno)
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")}
    def readdir(self, path, fh): return [".", ".."] + os.listdir(p(path))
    def open(self, path, flags): return os.open(p(path), flags & ~os.O_APPEND)
    def create(self, path, mode, fi=None): return os.open(p(path), os.O_RDWR | os.O_CREAT, mode)
    def read(self, path, size, offset, fh): return os.pread(fh, size, offset)
    def write(self, path, data, offset, fh): return os.pwrite(fh, data, offset)
    def truncate(self, path, length, fh=None): os.truncate(p(path), length)
    def fsync(self, path, datasync, fh): os.fsync(fh)
    def fsyncdir(self, path, datasync, fh):
        fd = os.open(p(path), os.O_RDONLY); os.fsync(fd); os.close(fd)
    def flush(self, path, fh): return 0
    def release(self, path, fh): os.close(fh)
    def unlink(self, path): os.unlink(p(path))
    def rename(self, old, new): os.rename(p(old), p(new))
    def mkdir(self, path, mode): os.mkdir(p(path), mode)
    def rmdir(self, path): os.rmdir(p(path))
    def chmod(self, path, mode): os.chmod(p(path), mode)
    def utimens(self, path, times=None): os.utime(p(path), times)
    def statfs(self, path):
        s = os.statvfs(p(path))
        return {k: getattr(s, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}
FUSE(Pass(), sys.argv[2], foreground=True, nothreads=True, allow_other=True)
'''


def append(folder: Path, mib: int, sync_every: int = 256) -> float:
    """MiB/s of 4 KiB appends with an fsync every MiB (every `sync_every` appends; 0: never)."""
    chunk, path = os.urandom(4096), folder / "00000000000000000000.log"
    began = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(mib * 256):
        os.write(fd, chunk)
        if sync_every and i % sync_every == sync_every - 1:
            os.fsync(fd)
    os.close(fd)
    seconds = time.perf_counter() - began
    path.unlink()
    return mib / seconds


def fsync_each(folder: Path, seconds: float = 2.0) -> float:
    """fsynced 1 KiB appends per second."""
    record, path, count = os.urandom(1024), folder / "fsync.log", 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        os.write(fd, record)
        os.fsync(fd)
        count += 1
    os.close(fd)
    path.unlink()
    return count / (time.perf_counter() - began)


def files(folder: Path, count: int = 300) -> float:
    """Checkpoint-style replaces per second: create, write, fsync, rename, fsync the directory."""
    began = time.perf_counter()
    data = os.urandom(1024)
    for i in range(count):
        tmp = folder / "checkpoint.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, folder / "checkpoint")
        dfd = os.open(folder, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
    return count / (time.perf_counter() - began)


def python_passthrough(python: str, scratch: Path) -> tuple[subprocess.Popen[bytes], Path]:
    (scratch / "py-backing").mkdir()
    (scratch / "py-mnt").mkdir()
    script = scratch / "passthrough.py"
    script.write_text(PASSTHROUGH)
    proc = subprocess.Popen([python, str(script), str(scratch / "py-backing"), str(scratch / "py-mnt")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.ismount(scratch / "py-mnt"):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the Python FUSE passthrough did not mount (is fusepy installed, and libfuse2?)")
        time.sleep(0.05)
    return proc, scratch / "py-mnt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--python-fuse", help="a Python interpreter with fusepy installed (adds the Python column)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lossyfs-") as tmp:
        scratch = Path(tmp)
        (scratch / "plain").mkdir()
        targets = {"plain": scratch / "plain"}
        proc = None
        with LossyMount(scratch / "lossy", label="bench:lossyfs") as disk:
            targets["lossyfs"] = disk.mountpoint
            try:
                if args.python_fuse:
                    proc, targets["python-fuse"] = python_passthrough(args.python_fuse, scratch)
                results: dict[tuple[str, str], list[float]] = {}
                workloads = {"append MiB/s": lambda f: append(f, args.mib),
                             "append-nosync MiB/s": lambda f: append(f, args.mib, 0), "fsync-each ops/s": fsync_each,
                             "files replaces/s": files}
                for round_no in range(args.rounds):
                    order = list(targets) if round_no % 2 == 0 else list(reversed(targets))
                    for work, fn in workloads.items():
                        for name in order:
                            results.setdefault((work, name), []).append(fn(targets[name]))
                    disk.sync_all()  # keep the undo record small between rounds
                print(f"{'workload':<20}" + "".join(f"{n:>16}" for n in targets) + "".join(f"{n + '/plain':>20}" for n in list(targets)[1:]))
                for work in workloads:
                    medians = {n: statistics.median(results[(work, n)]) for n in targets}
                    line = f"{work:<20}" + "".join(f"{medians[n]:>16.1f}" for n in targets)
                    line += "".join(f"{medians[n] / medians['plain']:>20.2f}" for n in list(targets)[1:])
                    print(line)
                print(f"rounds {args.rounds}; lossyfs stats: {disk.stats()}")
            finally:
                if proc is not None:
                    unmount(targets["python-fuse"])
                    proc.wait(timeout=10)


if __name__ == "__main__":
    main()
