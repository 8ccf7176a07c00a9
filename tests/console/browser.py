"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver.

``tools/install-chromium.sh`` installs both when absent (apt, as root). Nothing is
downloaded by Selenium: the driver path is given, so Selenium Manager never runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.processes import PROJECT_ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


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


# Read while console.js swaps the live part of a page: an element may go between finding it
# and reading it.
LIVE = (NoSuchElementException, StaleElementReferenceException)


def wait_for(
    driver: webdriver.Chrome,
    read: Callable[[], object],
    condition: Callable[[str], bool],
    timeout: float = 30,
    reload: bool = True,
) -> str:
    """``read()`` until ``condition`` holds on it, reloading the page between reads (or,
    with ``reload`` False, letting console.js refresh its figures); the value it held on."""
    seen: list[str] = []

    def holds(_: object) -> bool:
        seen[:] = [str(read())]
        if condition(seen[0]):
            return True
        if reload:
            driver.refresh()
        return False

    wait = WebDriverWait(driver, timeout, poll_frequency=0.3, ignored_exceptions=LIVE)
    try:
        wait.until(holds)
    except TimeoutException:
        raise AssertionError(f"on {driver.current_url} after {timeout} s: {seen}") from None
    return seen[0]


def scroll_to(driver: webdriver.Chrome, xpath: str) -> None:
    """Scroll the element at ``xpath`` into view (found again if console.js replaced it)."""

    def scrolled(_: object) -> bool:
        where = driver.find_element(By.XPATH, xpath)
        driver.execute_script("arguments[0].scrollIntoView()", where)
        return True

    WebDriverWait(driver, 10, poll_frequency=0.1, ignored_exceptions=LIVE).until(scrolled)


def text_of(driver: webdriver.Chrome, xpath: str) -> str:
    """The element's text (read again if console.js replaced it while it was read)."""
    got: list[str] = []

    def read(_: object) -> bool:
        got[:] = [str(driver.find_element(By.XPATH, xpath).text)]
        return True

    WebDriverWait(driver, 10, poll_frequency=0.1, ignored_exceptions=LIVE).until(read)
    return got[0]


def replaced(old: WebElement) -> Any:
    """The page that held ``old`` is gone. selenium's staleness_of expects a stale-element
    error, but Chromium mid-navigation can answer "Node with given id does not belong to the
    document" or "unhandled inspector error" instead (CI met the second once in a storm): the
    same fact, said differently. chromedriver waits for the navigation before its next command."""

    def gone(_: object) -> bool:
        try:
            old.is_enabled()
        except WebDriverException:  # StaleElementReferenceException included
            return True
        return False

    return gone
