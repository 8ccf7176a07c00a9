"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver.

``tools/install-chromium.sh`` installs both when absent (apt, as root). Nothing is
downloaded by Selenium: the driver path is given, so Selenium Manager never runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from tests.support.processes import PROJECT_ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1280,1000",
)  # fmt: skip


def install() -> None:
    subprocess.run([str(PROJECT_ROOT / "tools" / "install-chromium.sh")], check=True, timeout=900)


def session(profile: Path) -> Iterator[webdriver.Chrome]:
    """Chromium installed and started on ``profile``, quit when the caller is done (a
    module-scoped fixture yields from it)."""
    install()
    browser = start(profile)
    try:
        yield browser
    finally:
        browser.quit()


def start(profile: Path) -> webdriver.Chrome:
    """A fresh browser with its own, empty profile directory."""
    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    return driver
