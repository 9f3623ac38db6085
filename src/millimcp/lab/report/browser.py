"""A local headless Chromium, to take a screenshot of a report page (``--screenshot``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from millimcp.errors import ConfigurationError

__all__ = ["browser_command", "find_browser", "screenshot"]


def find_browser() -> str | None:
    """A headless-capable Chromium: ``MILLIMCP_CHROMIUM``, else the first on PATH."""
    given = os.environ.get("MILLIMCP_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_command(browser: str, profile_dir: str, *extra: str) -> list[str]:
    """The headless command line (its own profile directory, no sandbox for root in CI)."""
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--hide-scrollbars",
        f"--user-data-dir={profile_dir}",
        *extra,
    ]


def screenshot(
    page: Path, output: Path, *, width: int = 1280, height: int = 2000, timeout: float = 60.0
) -> None:
    """Render ``page`` in headless Chromium and save a PNG of it."""
    browser = find_browser()
    if browser is None:
        raise ConfigurationError("--screenshot needs chromium (or MILLIMCP_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="millimcp-chromium-") as profile:
        command = browser_command(
            browser,
            profile,
            f"--screenshot={output.resolve()}",
            f"--window-size={width},{height}",
            "--force-device-scale-factor=1",
            page.resolve().as_uri(),
        )
        completed = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    if completed.returncode != 0 or not output.exists():
        tail = completed.stderr.decode(errors="replace")[-500:]
        raise ConfigurationError(f"chromium could not take the screenshot: {tail}")
