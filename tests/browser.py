"""A headless Chromium for the page tests and the page benchmark: the system's browser and driver
(Debian's chromium and chromium-driver), driven by selenium, never a downloaded browser."""

from __future__ import annotations

import os
import shutil
import tempfile

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def find_browser() -> tuple[str, str] | None:
    """(chromium, chromedriver) from PATH, or None."""
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start(window: str = "1280,1600"):
    """A fresh headless Chromium with its own profile folder; returns (webdriver, profile)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_browser()
    if found is None:
        raise RuntimeError(
            "chromium and chromedriver are not on PATH (apt-get install chromium chromium-driver)"
        )
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium must not look for a driver online
    profile = tempfile.mkdtemp(prefix="dw-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = found[0]
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={window}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(found[1]), options=opts), profile


def stop(driver, profile: str) -> None:
    try:
        driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
