"""A lossy mount: a directory whose un-fsynced writes a power cut can take away.

    with LossyMount(tmp / "disk", label="run-1:kafka-1") as disk:
        (disk.mountpoint / "a").write_text("lost unless fsynced")
        disk.drop()   # {"dropped_bytes": 19, "dropped_files": 1, ...}

The native helper (native/lossyfs, built by the bootstrap) serves `root/backing/live` at
`root/mnt` and keeps, per file, the size at its last fsync and the original bytes of what
was overwritten since; per directory, its entries at its last fsync. `drop()` goes back to
exactly that, as a power cut would (docs/power.md). `fault("eio-write")` makes the disk fail
(EIO on writes or reads, ENOSPC) until `clear_fault()` (docs/disk.md). The mount is owned by this object: it is
removed on exit, on failure, and `harness cleanup --run-id` removes what a killed run left.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.provision.lossyfs import SOURCE_PREFIX, check_fuse, ensure_lossyfs, mounted, unmount

log = logging.getLogger(__name__)


DISK_ERRORS = ("eio-write", "eio-read", "enospc")  # the helper's presets (fault.rs PRESETS)


UNIX_PATH_MAX = 108  # sockaddr_un.sun_path, NUL included


class LossyMount:
    """One mounted lossyfs; see the module docstring. `writeback_s` models the kernel's writeback
    (dirty that long means on disk); None, the default, is the worst case: nothing survives."""

    def __init__(self, root: Path, label: str, writeback_s: float | None = None) -> None:
        if not label or any(c.isspace() or c == "," for c in label):
            # The label is the mount's source: a space or comma there splits the mount options, and
            # mountinfo would then escape it so that `is_mounted` never finds (or unmounts) it.
            raise HarnessError(f"lossyfs label {label!r}: it must be non-empty, without white space or commas.")
        self.root = Path(root)
        self.label = label
        self.writeback_s = writeback_s
        self.mountpoint = self.root / "mnt"
        self.backing = self.root / "backing"
        self.control = self.root / "control.sock"
        if len(str(self.control.resolve()).encode()) >= UNIX_PATH_MAX:
            # The helper would only log "path must be shorter than SUN_LEN" and never answer.
            raise HarnessError(f"the lossyfs control socket {self.control} is {len(str(self.control.resolve()).encode())} bytes "
                               f"long; a unix socket's path must be under {UNIX_PATH_MAX}.",
                               hint="use a shorter --store path (e.g. under /tmp or the working directory)")
        self.log_path = self.root / "lossyfs.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def source(self) -> str:
        return f"{SOURCE_PREFIX}{self.label}"

    def __enter__(self) -> "LossyMount":
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    def is_mounted(self) -> bool:
        return any(point == self.mountpoint for _, point in mounted(self.source))

    def mount(self, timeout_s: float = 10.0) -> "LossyMount":
        check_fuse()
        binary = ensure_lossyfs()
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.backing.mkdir(parents=True, exist_ok=True)
        args = [str(binary), "--backing", str(self.backing), "--mount", str(self.mountpoint),
                "--control", str(self.control), "--label", self.label]
        if self.writeback_s is not None:
            args += ["--writeback-s", str(self.writeback_s)]
        with open(self.log_path, "ab") as out:
            # Its own session: a Ctrl-C of the harness must not kill it before the brokers are gone.
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self.control.exists() and self.is_mounted():
                try:
                    self.command("ping")
                    return self
                except OSError:
                    pass
            time.sleep(0.05)
        self.unmount()
        raise HarnessError(f"the lossy filesystem helper could not mount {self.mountpoint}.",
                           hint="its log is below; `python -m harness bootstrap` rebuilds it",
                           details=self.log_path.read_text(errors="replace")[-2000:])

    def command(self, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Send one control command (ping, stats, sync-all, drop); its JSON answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(self.control))
            sock.sendall(name.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        answer = json.loads(data or b"{}")
        if not answer.get("ok"):
            raise HarnessError(f"lossyfs {self.label}: {name} failed: {answer.get('error', 'no answer')}")
        answer.pop("ok", None)
        return answer

    def drop(self) -> dict[str, Any]:
        """Power loss: discard every un-synced byte and directory entry. Returns dropped_bytes,
        dropped_files (files cut back or vanished), dropped_entries (names undone), seconds, and
        dropped_names: what was taken, by path under the mount, each {"path", "what": entry |
        restored | vanished | bytes, "bytes"}, names before files, at most 200 (dropped_names_more:
        how many more)."""
        return self.command("drop")

    def fault(self, error: str, path: str | None = None) -> dict[str, Any]:
        """Make the disk fail: `error` is a preset (DISK_ERRORS: eio-write, eio-read, enospc) or
        "ERRNO ops,..." (native/lossyfs/src/fault.rs); `path`, relative to the mount, limits it
        to what lies under it. Returns the fault as set; lasts until `clear_fault()`."""
        if any(c.isspace() for c in path or ""):
            raise HarnessError(f"lossyfs {self.label}: a fault path cannot hold white space ({path!r}).")
        return self.command(" ".join(["fault", error, *([path] if path else [])]))

    def clear_fault(self) -> dict[str, Any] | None:
        """A healthy disk again. Returns the fault that was set, with what it refused
        (injected: per operation, first_hit_s, active_s), or None if none was."""
        return self.command("clear-fault")["cleared"]

    def fault_presets(self) -> list[str]:
        """The disk errors this helper can inject ([] for a helper built before disk faults)."""
        return list(self.command("ping").get("faults") or [])

    def sync_all(self) -> dict[str, Any]:
        return self.command("sync-all")

    def stats(self) -> dict[str, Any]:
        return self.command("stats")

    def unmount(self, timeout_s: float = 5.0) -> None:
        """Unmount and stop the helper; idempotent and safe after a failed mount."""
        if self.is_mounted():
            unmount(self.mountpoint)
        if self.process is not None:
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("lossyfs %s did not exit after its unmount; killing it", self.label)
                self.process.kill()
                self.process.wait(timeout=timeout_s)
            self.process = None
        if self.is_mounted():  # a helper killed while mounted leaves a dead mount: remove it too
            unmount(self.mountpoint)


def unmount_disks(disks: dict[int, LossyMount]) -> list[str]:
    """Unmount a cluster's data mounts (its containers gone) and delete their data, which lived
    and died with the container before; returns what failed."""
    failures = []
    for disk in disks.values():
        try:
            disk.unmount()
            shutil.rmtree(disk.backing, ignore_errors=True)
        except Exception as exc:  # keep unmounting the others
            failures.append(f"lossy mount {disk.label}: {exc}")
    return failures
