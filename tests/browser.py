"""Headless Chromium for checking the HTML reports: find (or install Debian's `chromium`), load a
local page with no network, and return its DOM after scripts ran, plus a screenshot.

No WebDriver: `--dump-dom` after a virtual-time budget gives the DOM as the page's own scripts
left it, and the report pages write what a test needs into the DOM (a JS-error sentinel, the
number of network resources requested). `--host-resolver-rules="MAP * ~NOTFOUND"` makes any
request that does try to leave the machine fail instead of reaching the internet.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BootstrapError, HarnessError

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # /dev/shm is small in containers
    "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing resolves: no request can leave
)


def find_chromium() -> str | None:
    for name in CANDIDATES:
        if path := shutil.which(name):
            return path
    return None


def ensure_chromium() -> str:
    """The path of a Chromium binary, installing Debian's `chromium` package when none is found."""
    path = find_chromium()
    if path:
        return path
    from harness.provision.docker_engine import apt_install

    apt_install(["chromium"], "headless Chromium (to check the HTML reports)")
    path = find_chromium()
    if not path:
        raise BootstrapError("the Debian package `chromium` was installed but no chromium binary is on PATH.",
                             hint="check `dpkg -L chromium | grep bin/`")
    return path


@dataclass
class PageLoad:
    dom: str  # the DOM after the page's scripts ran (--dump-dom)
    screenshot: Path | None
    stderr: str


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"chromium did not finish within {timeout_s:.0f} s: {' '.join(args[-2:])}",
                           hint="the machine may be overloaded; retry") from exc


def load_page(page: Path | str, screenshot: Path | str | None = None, *, width: int = 1400,
              height: int = 2400, budget_ms: int = 10000, timeout_s: float = 120.0,
              chromium: str | None = None) -> PageLoad:
    """Open a local HTML file headless (fresh profile, no network); return its final DOM and,
    when `screenshot` is given, write a PNG of the first `height` pixels there."""
    binary = chromium or ensure_chromium()
    url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="kh-chromium-") as profile:
        base = [binary, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                f"--window-size={width},{height}", "--hide-scrollbars"]
        proc = _run([*base, "--dump-dom", url], timeout_s)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise HarnessError(f"chromium could not load {page} (exit {proc.returncode}).",
                               details=proc.stderr[-2000:])
        shot = None
        if screenshot is not None:
            shot = Path(screenshot)
            shot.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(Path(profile) / "Default", ignore_errors=True)
            sp = _run([*base, f"--screenshot={shot}", url], timeout_s)
            if sp.returncode != 0 or not shot.exists():
                raise HarnessError(f"chromium could not screenshot {page} (exit {sp.returncode}).",
                                   details=sp.stderr[-2000:])
    return PageLoad(proc.stdout, shot, proc.stderr)
