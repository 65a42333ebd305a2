"""Open a page the tuner wrote in headless Chromium (Debian's chromium and chromedriver, driven
by selenium) and report what a person would see: its images as drawn, its console errors, its
text, and a screenshot."""

from __future__ import annotations

import base64
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Headless, and nothing that reaches the network or a profile of this machine: the pages are
# offline files, and a fresh profile per browser keeps runs independent.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1024",
)
# Resolves once every <img> has decoded (or failed to): the real condition, not a sleep.
ALL_IMAGES_DECODED = """
const done = arguments[arguments.length - 1];
Promise.allSettled(Array.from(document.images, (img) => img.decode())).then(() => done(true));
"""
IMAGES = """
return Array.from(document.images, (img) => {
  const box = img.getBoundingClientRect();
  return {alt: img.alt, complete: img.complete, naturalWidth: img.naturalWidth,
          width: box.width, height: box.height};
});
"""


@dataclass(frozen=True)
class Seen:
    """What the browser showed of one page."""

    title: str
    heading: str
    text: str
    images: list[dict[str, Any]]
    severe: list[str]  # console and loading errors (browser log at SEVERE)


def missing() -> str | None:
    """Why no browser can be started here, or None."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not binary.exists():
            return f"{binary} is missing (scripts/system-packages installs chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """One headless Chromium with a fresh profile, quit (and its profile removed) on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tuner-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def look_at(driver: Any, page: Path, screenshot: Path) -> Seen:
    """Open `page`, wait until its images have decoded, and save a full-page screenshot."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(page.resolve().as_uri())  # returns once the page has loaded
    driver.set_script_timeout(30)
    driver.execute_async_script(ALL_IMAGES_DECODED)
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
    )
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    return Seen(
        title=driver.title,
        heading=driver.execute_script("return document.querySelector('h1')?.innerText ?? ''"),
        text=driver.execute_script("return document.body.innerText"),
        images=driver.execute_script(IMAGES),
        severe=[e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"],
    )
