"""The sandbox's inbox in a real headless Chromium against `resetgate up --provider postmark`:
the banner's inbox URL lists the emails, a reset email opens rendered as the player sees it and
its link leads to the reset page; a bounce (which reaches resetgate only through Postmark's
bounce webhook, https://postmarkapp.com/developer/webhooks/bounce-webhook) shows as a bounce."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import aiohttp
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from services.ctl import stack
from tests.console import browser as chromium
from tests.ctl.conftest import Stack
from tests.ctl.test_up import account_view

pytestmark = pytest.mark.timeout(600)  # the first test on the shared stack starts it


@pytest.fixture
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    yield from chromium.session(tmp_path_factory.mktemp("chromium-profile"))


def rows_until(driver: webdriver.Chrome, url: str, wanted: int, bounce: bool) -> list[str]:
    """The inbox's rows once it lists ``wanted`` emails (and, if asked, a bounce that
    resetgate's status column already shows as bounced: the sandbox lists its event before
    the webhook has reached resetgate), reloading as a reader would; the rows' texts."""
    deadline = time.monotonic() + 240
    texts: list[str] = []
    while time.monotonic() < deadline:
        driver.get(url)
        texts = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "tr.email")]
        bounced = any(" bounce " in t and t.endswith(" bounced") for t in texts)
        if len(texts) >= wanted and (not bounce or bounced):
            return texts
        time.sleep(0.5)
    raise AssertionError(f"the inbox never showed {wanted} emails (bounce: {bounce}): {texts}")


async def ask_resets(base: str, *logins: str) -> None:
    async with aiohttp.ClientSession() as session:
        for login in logins:
            async with session.post(f"{base}/v1/password-resets", json={"login": login}) as r:
                assert r.status == 202


async def test_the_inbox_lists_renders_and_links_and_shows_a_bounce_as_a_bounce(
    postmark_stack: Stack, driver: webdriver.Chrome
) -> None:
    """On the stack test_up.py's postmark test uses too (tests/ctl/conftest.py): whichever
    runs first, bounce-me's email is older than player1's asked for here."""
    inbox = re.search(r"inbox +(\S+/_sandbox/inbox)", postmark_stack.banner)
    assert inbox is not None, postmark_stack.banner
    env_file = stack.read_env(postmark_stack.directory / "env")
    base, token = env_file["RESETGATE_ADMISSION_URL"], env_file["RESETGATE_INTERNAL_API_TOKEN"]
    await ask_resets(base, "bounce-me", "player1")
    # Each reload of the inbox costs the browser about 0.25 CPU-s: it is opened once
    # resetgate holds the bounce, which its webhook brings last.
    await account_view(base, token, "acct-1003", "bounced")
    rows = await asyncio.to_thread(rows_until, driver, inbox.group(1), 2, True)
    bounce = next(r for r in rows if "someone@bounce.example" in r)
    assert " postmark " in bounce and " bounce " in bounce, bounce
    assert bounce.endswith(" bounced"), "resetgate's status, from the bounce webhook"
    delivered = next(r for r in rows if "player1@example.com" in r)
    # Newest first, by the time each row shows: the two emails are sent from two partitions,
    # in either order.
    stamps = [row.split()[0] for row in rows]
    assert stamps == sorted(stamps, reverse=True), "newest first"
    assert " no " in delivered, delivered
    await asyncio.to_thread(open_and_follow, driver)


def open_and_follow(driver: webdriver.Chrome) -> None:
    row = next(
        r
        for r in driver.find_elements(By.CSS_SELECTOR, "tr.email")
        if "player1@example.com" in r.text
    )
    row.find_element(By.TAG_NAME, "a").click()
    assert driver.find_element(By.CSS_SELECTOR, "td.to").text == "player1@example.com"
    assert "/reset-password?" in driver.find_element(By.TAG_NAME, "pre").text  # plain part
    driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
    rendered = [a.get_attribute("href") or "" for a in driver.find_elements(By.TAG_NAME, "a")]
    driver.switch_to.default_content()
    link = driver.find_element(By.ID, "reset-link")
    assert link.get_attribute("href") in rendered, "the rendered email carries the same link"
    link.click()
    assert driver.find_element(By.TAG_NAME, "h1").text == "Reset your password"
    assert driver.find_elements(By.CSS_SELECTOR, "input[type=password]"), driver.page_source
