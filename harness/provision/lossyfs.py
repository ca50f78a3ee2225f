"""The lossy filesystem helper (native/lossyfs, Rust): build it once, find and remove its mounts.

The bootstrap builds it with cargo from crates.io (fuser without libfuse: it mounts with
mount(2) as root, so no Debian package is needed) into the cache, keyed by a digest of its
sources: a warm bootstrap only hashes four small files. A machine without cargo or FUSE
still bootstraps; only the `power` and `disk` nemeses then refuse to run, naming what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from harness.errors import BootstrapError, HarnessError
from harness.provision.settings import cache_dir

log = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().parents[2] / "native" / "lossyfs"
FUSE_DEVICE = Path("/dev/fuse")
SOURCE_PREFIX = "lossyfs:"  # every mount's source is lossyfs:<run id>:<name> (see /proc/self/mountinfo)


def source_digest() -> str:
    digest = hashlib.sha256()
    files = [SOURCE / "Cargo.toml", SOURCE / "Cargo.lock", *sorted((SOURCE / "src").glob("*.rs"))]
    for path in files:
        if path.exists():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def binary_path() -> Path:
    return cache_dir() / "lossyfs" / source_digest() / "lossyfs"


def find_cargo() -> str | None:
    return shutil.which("cargo") or next((str(p) for p in [Path.home() / ".cargo" / "bin" / "cargo"] if p.exists()), None)


def ensure_lossyfs() -> Path:
    """The helper's path, built first if its sources changed (cold: ~25 s; warm: a hash)."""
    binary = binary_path()
    if binary.exists():
        return binary
    cargo = find_cargo()
    if cargo is None:
        raise BootstrapError("cargo (the Rust toolchain) is not installed, so the lossy filesystem helper cannot be built.",
                             hint="install Rust (https://rustup.rs, or Debian's `cargo` if recent enough), then run `./chaos bootstrap`")
    target = cache_dir() / "lossyfs" / "target"
    began = time.monotonic()
    log.info("building the lossy filesystem helper (native/lossyfs) with %s", cargo)
    result = subprocess.run([cargo, "build", "--release", "--locked", "--manifest-path", str(SOURCE / "Cargo.toml")],
                            env={**os.environ, "CARGO_TARGET_DIR": str(target)}, capture_output=True, text=True)
    if result.returncode != 0:
        raise BootstrapError("building the lossy filesystem helper (native/lossyfs) failed.",
                             hint="cargo needs to reach crates.io once; its output is below", details=result.stderr[-3000:])
    binary.parent.mkdir(parents=True, exist_ok=True)
    scratch = binary.with_suffix(".tmp")
    shutil.copy2(target / "release" / "lossyfs", scratch)
    scratch.rename(binary)
    log.info("lossy filesystem helper built in %.1f s: %s", time.monotonic() - began, binary)
    return binary


def check_fuse() -> None:
    """Refuse early, naming the fix, when this machine cannot serve a FUSE mount."""
    if not FUSE_DEVICE.exists():
        raise HarnessError("the power and disk nemeses need FUSE (their lossy data mounts), and /dev/fuse does not exist on this machine.",
                           hint="load the fuse module (`modprobe fuse`) or, in a container, pass --device /dev/fuse")
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        raise HarnessError("the power and disk nemeses mount a FUSE filesystem: that needs root, or fusermount3 for a user.",
                           hint="run the harness as root, or install Debian's `fuse3` package")
    try:
        os.close(os.open(FUSE_DEVICE, os.O_RDWR))
    except OSError as exc:
        raise HarnessError(f"/dev/fuse exists but cannot be opened: {exc.strerror}.",
                           hint="give this user read-write access to /dev/fuse (or run as root)") from exc


def mounted(prefix: str = SOURCE_PREFIX) -> list[tuple[str, Path]]:
    """(source, mount point) of every lossyfs mount whose source starts with `prefix`."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(tail) >= 2 and tail[0].startswith("fuse") and tail[1].startswith(prefix):
            point = fields[4].encode().decode("unicode_escape")  # mountinfo writes a space as \040
            found.append((tail[1], Path(point)))
    return found


def unmount(point: Path) -> None:
    """Unmount a lossyfs mount point; lazily when something still holds it."""
    if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def unmount_leftovers(run_id: str | None = None) -> list[str]:
    """Unmount what runs left mounted (of one run, or of any): the cleanup after a killed harness.
    The helper exits by itself once its mount is gone."""
    prefix = f"{SOURCE_PREFIX}{run_id}:" if run_id else SOURCE_PREFIX
    points = []
    for _, point in sorted(mounted(prefix), key=lambda m: -len(str(m[1]))):
        unmount(point)
        points.append(str(point))
    return points
