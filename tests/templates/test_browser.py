"""Every shipped locale rendered in headless Chromium (Debian's, tests/console/browser.py),
looked at and photographed: the HTML part loads nothing from anywhere, Arabic lays out right
to left, the button carries the one link and is on screen at a phone's width, and nothing
is wider than the screen. Screenshots go to ``RESETGATE_TEMPLATE_SCREENSHOTS`` (the
committed ones: ``docs/templates/``) or to the test's temporary directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from html import escape
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from shared.emails.check import SAMPLE_TOKEN
from shared.emails.files import Templates
from tests.console import browser as chromium
from tests.templates.helpers import compose, mailer

LOCALES = Templates().locales()
NOW_MS = 1_796_153_400_000  # 2026-12-01 19:30 UTC: the screenshots show a plausible expiry
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    yield from chromium.session(tmp_path_factory.mktemp("chromium-profile"))


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("RESETGATE_TEMPLATE_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("template-shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _looks(driver: webdriver.Chrome, width: int) -> dict[str, object]:
    driver.set_window_size(width, 900)
    return driver.execute_script(  # type: ignore[no-any-return]
        "const a = document.querySelector('a'); const r = a.getBoundingClientRect();"
        "return {dir: getComputedStyle(document.body.querySelector('table table')).direction,"
        " resources: performance.getEntriesByType('resource').length,"
        " anchors: document.querySelectorAll('a').length, href: a.getAttribute('href'),"
        " buttonInView: r.left >= 0 && r.right <= innerWidth && r.width > 0,"
        " overflow: document.documentElement.scrollWidth - innerWidth};"
    )


@pytest.mark.parametrize("locale", LOCALES)
def test_each_locale_renders_in_chromium(
    locale: str, driver: webdriver.Chrome, shots: Path, tmp_path: Path
) -> None:
    composed = compose(mailer(), locale=locale, token=SAMPLE_TOKEN, now_ms=NOW_MS)
    html = str(composed.message["html"])
    page = tmp_path / f"{locale}.html"
    page.write_text(html, encoding="utf-8")
    driver.get(page.as_uri())
    assert (
        driver.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        == (composed.message["subject"])
    )
    phone = _looks(driver, 390)
    assert phone["resources"] == 0 and phone["anchors"] == 1
    assert escape(str(phone["href"])) in html and SAMPLE_TOKEN in str(phone["href"])
    assert phone["buttonInView"] and phone["overflow"] == 0, phone
    assert phone["dir"] == ("rtl" if locale == "ar" else "ltr")
    _looks(driver, 720)
    driver.save_screenshot(str(shots / f"{locale}.png"))
    assert (shots / f"{locale}.png").stat().st_size > 5000
