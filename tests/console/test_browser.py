"""The console in a real headless Chromium against real processes (sandbox provider under a
storm, admission with its console listener, a sender, the poller and the router): find an
operation, read its timeline while the storm runs (a third partition held until then, so the
storm's work cannot all be done first on a loaded machine), pause a partition, quarantine (find it
among the quarantined, follow its audit entry) and release one of its operations, watch the
oldest page refresh itself, see a bounce as a bounce; every rendered page is scanned for a
login, an address or a token. Screenshots go to ``RESETGATE_CONSOLE_SCREENSHOTS`` (the committed
ones: ``docs/console/``) or to the test's temporary directory."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from services.ctl.embedded import free_port
from shared import control
from shared.directory import Account, RedisDirectory
from shared.keys import CONTACT_FORMS, PartitionKeys
from tests.archive.helpers import until
from tests.conftest import TEST_TOKEN_KEYS
from tests.console import browser as chromium
from tests.console.helpers import forbidden_texts, scan
from tests.support.processes import Processes
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox_process, sandbox_stats

TOKEN = "browser-internal-token-0123456789"
STORM = 240  # operations admitted at once
PARTITIONS = 4
RATE = 12  # the sandbox's sends/s; the sender's ceiling (24/s) is twice that, so 429s come
BOUNCE_DOMAIN = "bounce.example"
# The home page's chart row once the storm's sends and 429s are both drawn.
STORM_HOUR = re.compile(r"[1-9]\d* accepted in the last hour.*[1-9]\d* 429s in the last hour", re.S)
pytestmark = pytest.mark.timeout(360)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    yield from chromium.session(tmp_path_factory.mktemp("chromium-profile"))


class Stack:
    def __init__(self, processes: Processes, console_url: str, redis: Redis, provider: str):
        self.processes = processes
        self.console = console_url
        self.redis = redis
        self.provider = provider
        self.accounts: list[tuple[str, Account]] = []
        self.operations: list[str] = []

    async def internal(self, path: str, body: dict[str, str]) -> Any:
        url = self.processes["admission"].url + path
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, json=body, headers={"Authorization": f"Bearer {TOKEN}"}) as response,
        ):
            return await response.json()

    async def storm(self, count: int) -> None:
        directory = RedisDirectory(self.redis)
        for i in range(count):
            account = Account(f"acct-b{i:03d}", f"player{i:03d}@mail.example")
            await directory.add(f"login-b{i:03d}", account)
            self.accounts.append((f"login-b{i:03d}", account))
        # The first alone, then the rest at once: it is first in its partition's queue.
        replies = [await self.admit(self.accounts[0][1])]
        replies += await asyncio.gather(*(self.admit(a) for _, a in self.accounts[1:]))
        self.operations = [r["operation_id"] for r in replies]

    async def admit(self, account: Account) -> Any:
        body = {"account_id": account.account_id, "entry_point": "agent", "actor": "t"}
        return await self.internal("/internal/v1/recovery-operations", body)

    async def bounce_me(self) -> tuple[str, str]:
        """An account whose address bounces, reset through the internal API: the account's
        id and its operation's."""
        account = Account("acct-bounce", f"someone@{BOUNCE_DOMAIN}")
        await RedisDirectory(self.redis).add("login-bounce", account)
        return account.account_id, (await self.admit(account))["operation_id"]

    async def accepted(self, operation_id: str) -> bool:
        return await self.state(operation_id) == "accepted"

    async def bounced(self, operation_id: str) -> bool:
        return await self.field(operation_id, "delivery") == "bounced"

    async def state(self, operation_id: str) -> str:
        return await self.field(operation_id, "state")

    async def field(self, operation_id: str, name: str) -> str:
        return str(
            await self.redis.hget(PartitionKeys.of(operation_id).operation(operation_id), name)
        )


@pytest.fixture
async def stack(redis: Redis, redis_server: Any, tmp_path: Path) -> AsyncIterator[Stack]:
    async with run_sandbox_process(
        send_rate_per_second=RATE, delivered_delay_seconds=1.0, bounce_domain=BOUNCE_DOMAIN
    ) as provider:
        port = free_port()
        base = {
            "RESETGATE_REDIS_URL": redis_server.url,
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_INTERNAL_API_TOKEN": TOKEN,
            "RESETGATE_PROVIDER_URL": provider,
            "RESETGATE_PROVIDER_API_KEY": SANDBOX_API_KEY,
            "RESETGATE_PARTITIONS": str(PARTITIONS),
            "RESETGATE_IP_LIMIT_PER_MINUTE": "0",
            "RESETGATE_SHUTDOWN_GRACE_SECONDS": "3",
        }
        async with Processes(tmp_path, base) as processes:
            processes.add(
                "admission", RESETGATE_CONSOLE_PORT=str(port), RESETGATE_CONSOLE_HOST="127.0.0.1"
            )
            processes.add(
                "sender",
                RESETGATE_PROVIDER_MAX_RATE="24",
                RESETGATE_CONCURRENCY="4",
                RESETGATE_READ_BATCH="2",
                RESETGATE_PROMOTE_INTERVAL_SECONDS="0.1",
            )
            processes.add("router", RESETGATE_BLOCK_MS="100")
            # Delivery as the provider reports it (the bounce below) comes through the poller.
            processes.add("poller", RESETGATE_POLL_INTERVAL_SECONDS="0.5")
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            yield Stack(processes, f"http://127.0.0.1:{port}", redis, provider)


def _shots() -> Path | None:
    where = os.environ.get("RESETGATE_CONSOLE_SCREENSHOTS")
    return Path(where) if where else None


class Pages:
    """The browser, plus what every visited page must not contain."""

    def __init__(self, driver: webdriver.Chrome, stack: Stack, shots: Path, forbidden: list[str]):
        self.driver = driver
        self.stack = stack
        self.shots = shots
        self.forbidden = forbidden
        self.scanned = 0

    def open(self, path: str) -> None:
        self.driver.get(self.stack.console + path)
        self.check()

    def check(self) -> None:
        found = scan(self.driver.page_source, self.forbidden)
        assert found == [], f"{self.driver.current_url} renders {found}"
        self.scanned += 1

    def follow(self, element: WebElement) -> None:
        """Click and wait for the next page (a click returns before it has loaded)."""
        old = self.driver.find_element(By.TAG_NAME, "html")
        element.click()
        WebDriverWait(self.driver, 20).until(chromium.replaced(old))
        self.check()

    def click(self, text: str) -> None:
        self.follow(self.driver.find_element(By.LINK_TEXT, text))

    def submit(self, selector: str = "button[type=submit].danger") -> None:
        self.follow(self.driver.find_element(By.CSS_SELECTOR, selector))

    def heading(self) -> str:
        return str(self.driver.find_element(By.TAG_NAME, "h1").text)

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))

    def wait_for(self, text: str, timeout: float = 20, reload: bool = True) -> None:
        chromium.wait_for(
            self.driver, lambda: self.driver.page_source, lambda page: text in page, timeout, reload
        )
        self.check()


def _partition_row(pages: Pages, partition: int) -> str:
    xpath = f"//section[2]//tbody/tr[td[1]='{partition}']"
    return str(pages.driver.find_element(By.XPATH, xpath).text)


async def _throttled_once(stack: Stack) -> str:
    for op in stack.operations:
        rows = await stack.redis.lrange(PartitionKeys.of(op).attempts(op), 0, -1)
        if any('"throttled"' in r for r in rows):
            return op
    raise AssertionError("the storm deferred no operation")


async def _still_waiting(stack: Stack, partition: int | None = None) -> str:
    # The newest of the storm for choosing a partition; the oldest of a paused partition, so
    # it is the first sent once the partition resumes.
    order = stack.operations if partition is not None else list(reversed(stack.operations))
    for op in order:
        if partition is not None and PartitionKeys.of(op).partition != partition:
            continue
        if await stack.state(op) in ("queued", "deferred"):
            return op
    raise AssertionError("no operation of the storm is still waiting")


def _sign_in(pages: Pages) -> None:
    pages.open("/console/providers")
    assert pages.heading() == "Sign in"  # no credentials: sent to sign in, nothing shown
    pages.driver.find_element(By.ID, "name").send_keys("maria")
    pages.driver.find_element(By.ID, "token").send_keys(TOKEN)
    pages.submit("main button[type=submit]")
    assert pages.heading() == "Is anything wrong?"


def _find(pages: Pages, query: str) -> None:
    """The search every page carries in its header."""
    pages.driver.find_element(By.ID, "nav-q").send_keys(query)
    pages.submit("form.find button[type=submit]")


async def test_console_in_chromium_during_a_storm(
    driver: webdriver.Chrome, stack: Stack, token_keys: Any, tmp_path: Path
) -> None:
    shots = _shots() or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    pages = Pages(driver, stack, shots, [])
    _sign_in(pages)  # before the storm: on a loaded machine a sign-in takes seconds
    await stack.storm(STORM)
    login, account = stack.accounts[0]
    first = stack.operations[0]
    pages.forbidden = forbidden_texts(
        [lg for lg, _ in stack.accounts],
        [a.email for _, a in stack.accounts],
        token_keys,
        stack.operations,
    )
    # The same player also clicked resend and wrote to support: both converge on `first`.
    async with aiohttp.ClientSession() as session:
        await session.post(
            stack.processes["admission"].url + "/v1/password-resets", json={"login": login}
        )
    await stack.redis.xadd(
        CONTACT_FORMS,
        {
            "event_id": "evt-b1",
            "topic": "password_reset",
            "login": login,
            "submitted_at": "2026-01-01T00:00:00Z",
        },
    )

    # Pause another partition at once, early in the storm; it drains, then stands paused.
    partition = (PartitionKeys.of(first).partition + 1) % PARTITIONS
    pages.open(f"/console/partitions/{partition}/pause")
    pages.driver.find_element(By.ID, "reason").send_keys("watching a bounce spike")
    pages.submit()
    assert "Paused." in driver.page_source
    row = _partition_row(pages, partition)
    assert "paused" in row and "console:maria" in row
    # Once the first email is through, a third partition is held until its timeline has been
    # read (below): the storm's work cannot all be done first, however slowly this machine
    # drives the browser (at full rate it was, in 2 of 5 runs under load).
    await until(lambda: stack.accepted(first), 60)
    held = (PartitionKeys.of(first).partition + 2) % PARTITIONS
    await control.pause_partitions(stack.redis, [held], "held until the timeline is read")

    # Find by account id, then open its operation; read its timeline while the storm runs.
    _find(pages, account.account_id)
    assert pages.heading() == "Account"
    pages.click(first)
    assert pages.heading() == "Recovery operation"
    pages.wait_for("<td>accepted</td>")  # a finished attempt in the timeline
    elsewhere = [op for op in stack.operations if PartitionKeys.of(op).partition != partition]
    storm_left = sum([await stack.state(op) != "accepted" for op in elsewhere])
    assert storm_left > 0, "the storm was over before the timeline was read"
    pages.wait_for("case-")  # the router's support case, attached
    text = driver.find_element(By.TAG_NAME, "main").text
    assert "public" in text and "contact_form" in text and "agent" in text
    await control.resume_partitions(stack.redis, [held])

    # The paused partition drains (attempts a sender had already taken finish), then stands.
    pages.open("/console/providers")
    chromium.wait_for(
        driver, lambda: _partition_row(pages, partition), lambda row: "draining" not in row, 30
    )
    pages.check()
    pages.shot("providers")
    waiting = await _still_waiting(stack, partition)

    # Quarantine the waiting operation, then release it, each behind a confirmation. Until
    # then it waits for its partition to be resumed, and says so instead of "(19 s ago)".
    _find(pages, waiting)
    assert f"waits for partition {partition} to be resumed" in driver.page_source
    pages.click("Quarantine…")
    assert pages.heading() == "Quarantine"
    driver.find_element(By.ID, "reason").send_keys("player asked to hold")
    pages.submit()
    assert await stack.state(waiting) == "quarantined"
    assert "quarantined by console:maria" in driver.page_source
    # Findable from the console, as the CLI lists it; the audit entry links back to it.
    pages.open("/console/oldest")
    held = driver.find_element(By.XPATH, "//section[h2[@id='quarantined-h']]").text
    assert waiting in held, held
    pages.open("/console/providers")
    audit = driver.find_element(By.XPATH, f"//tbody/tr[td[3]='quarantine']/td[4]/a[.='{waiting}']")
    pages.follow(audit)
    assert pages.heading() == "Recovery operation" and waiting in driver.current_url
    pages.click("Release…")
    pages.submit()
    assert await stack.state(waiting) == "queued"

    # The oldest page, while the paused partition still waits: it refreshes itself
    # (console.js) without a reload.
    pages.open("/console/oldest")
    assert waiting in driver.find_element(By.ID, "live").text
    pages.shot("oldest")
    WebDriverWait(driver, 12).until(
        lambda d: "Refreshed at" in d.find_element(By.ID, "refreshed").text
    )
    pages.check()

    pages.open(f"/console/partitions/{partition}/resume")
    pages.submit()
    # Each reload in the browser costs it about 0.25 CPU-s: the page is opened once the store
    # holds what it must show (and reloaded only if it does not show it yet).
    await until(lambda: stack.accepted(waiting), 90)
    pages.open(f"/console/operations/{waiting}")
    pages.wait_for("<td>accepted</td>", timeout=90)
    sent = (await sandbox_stats(stack.provider, operation_id=waiting))["sent_by_operation"]
    assert sent[waiting] == 1

    # An operation the storm deferred: its timeline shows the 429, the Retry-After and its source.
    retried = await _throttled_once(stack)
    pages.open(f"/console/operations/{retried}")
    cells = driver.find_element(By.XPATH, "//tbody/tr[td[4]='throttled']").text
    assert "429" in cells and "the provider said how many seconds to wait" in cells
    assert "Fencing" not in driver.page_source and "sent by " in cells
    pages.shot("operation")

    # A bounce reads as a bounce on the account, never as a green "accepted".
    bounced, bounce = await stack.bounce_me()
    await until(lambda: stack.bounced(bounce), 90)
    pages.open(f"/console/accounts/{bounced}")
    pages.wait_for("accepted, then bounced", timeout=90)
    badge = driver.find_element(By.CSS_SELECTOR, "td .state-bounced")
    assert badge.text == "accepted, then bounced"
    assert badge.value_of_css_property("color") != driver.find_element(
        By.TAG_NAME, "main"
    ).value_of_css_property("color")

    pages.open("/console/providers")
    throttled = driver.find_element(By.XPATH, "//section[1]//tbody/tr/td[7]").text
    assert int(throttled) > 0  # the storm's 429s, counted by the pacer
    # The storm's last hour, drawn from what the sender's pacer counted: sends accepted and
    # 429s per minute (sampled every 10 s: the figures follow without a reload).
    pages.open("/console/")
    hour = "//section[h2[@id='hour-h']]//tbody/tr[1]"
    chromium.wait_for(
        driver,
        lambda: pages.driver.find_element(By.XPATH, hour).text,
        lambda row: bool(STORM_HOUR.search(row)),
        30,
        reload=False,
    )
    chromium.scroll_to(driver, "//section[h2[@id='hour-h']]")
    pages.shot("home-storm")
    pages.check()
    assert pages.scanned >= 15
