"""The console in headless Chromium on a stack with two providers (primary and standby, both
the sandbox) and real admission processes (one whose token sign-in acts, one whose sign-in
only reads): the home page names both providers with their lines, the counters and the
lists; a pause of primary shows on its line with the reason; support cannot resume it,
on-call can, and the trail names who; a switch and its rollback from the console move the
partitions and are in the trail. Screenshots go to ``RESETGATE_CONSOLE_SCREENSHOTS`` (the
committed ones: ``docs/console/``)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from services.ctl.embedded import free_port
from shared import clock, control
from shared.directory import Account, RedisDirectory
from shared.keys import AUDIT, PartitionKeys
from shared.scripts.pacing import Observation, PaceAcquire, PaceFeedback, Tuning
from tests.conftest import TEST_TOKEN_KEYS
from tests.console import browser as chromium
from tests.support.processes import Processes, ServiceProcess
from tests.support.sandbox import SANDBOX_API_KEY, run_sandbox_process

TOKEN = "browser-internal-token-0123456789"
PARTITIONS = 4
pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    yield from chromium.session(tmp_path_factory.mktemp("chromium-profile"))


class Stack:
    def __init__(self, redis: Redis, admission: str, on_call: str, support: str) -> None:
        self.redis = redis
        self.admission = admission
        self.on_call = on_call  # the console of a sign-in with the act role
        self.support = support  # the same, where the token signs in read-only


def _provider_env(sandbox: str) -> dict[str, str]:
    env = {"RESETGATE_PROVIDERS": "primary,standby"}
    for name in ("PRIMARY", "STANDBY"):
        env.update(
            {
                f"RESETGATE_PROVIDER_{name}_KIND": "http",
                f"RESETGATE_PROVIDER_{name}_URL": sandbox,
                f"RESETGATE_PROVIDER_{name}_API_KEY": SANDBOX_API_KEY,
            }
        )
    return env


@pytest.fixture
async def stack(redis: Redis, redis_server: Any, tmp_path: Path) -> AsyncIterator[Stack]:
    async with run_sandbox_process(send_rate_per_second=50) as sandbox:
        base = {
            "RESETGATE_REDIS_URL": redis_server.url,
            "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
            "RESETGATE_INTERNAL_API_TOKEN": TOKEN,
            "RESETGATE_PARTITIONS": str(PARTITIONS),
            "RESETGATE_SHUTDOWN_GRACE_SECONDS": "3",
            **_provider_env(sandbox),
        }
        on_call, support = free_port(), free_port()
        async with Processes(tmp_path, base) as processes:
            processes.add("admission", RESETGATE_CONSOLE_PORT=str(on_call))
            # A second admission whose token sign-in gets the read role only: support.
            processes.services["support"] = ServiceProcess(
                "support",
                {
                    **base,
                    "RESETGATE_CONSOLE_PORT": str(support),
                    "RESETGATE_CONSOLE_TOKEN_ROLE": "read",
                },
                tmp_path,
                module="services.admission",
            )
            await asyncio.gather(*(processes.start(n) for n in processes.services))
            yield Stack(
                redis,
                processes["admission"].url,
                f"http://127.0.0.1:{on_call}",
                f"http://127.0.0.1:{support}",
            )


class Browser:
    def __init__(self, driver: webdriver.Chrome, base: str, shots: Path) -> None:
        self.driver, self.base, self.shots = driver, base, shots

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def submit(self, selector: str = "button[type=submit].danger") -> None:
        old = self.driver.find_element(By.TAG_NAME, "html")
        self.driver.find_element(By.CSS_SELECTOR, selector).click()
        WebDriverWait(self.driver, 30).until(chromium.replaced(old))

    def sign_in(self, name: str) -> None:
        self.driver.delete_all_cookies()
        self.open("/console/sign-in")
        self.driver.find_element(By.ID, "name").send_keys(name)
        self.driver.find_element(By.ID, "token").send_keys(TOKEN)
        self.submit("main button[type=submit]")

    def text(self, xpath: str) -> str:
        return chromium.text_of(self.driver, xpath)

    def line(self, provider: str) -> str:
        return self.text(f"//tr[@data-provider='{provider}']")

    def chart(self, provider: str) -> str:
        return self.text(f"//tr[@data-chart='{provider}']")

    def wait_for(self, read: Any, condition: Any, timeout: float = 30, reload: bool = True) -> str:
        return chromium.wait_for(self.driver, read, condition, timeout, reload)

    def find(self, query: str, by: str = "id") -> None:
        """The search every page carries in its header."""
        Select(self.driver.find_element(By.ID, "nav-by")).select_by_value(by)
        self.driver.find_element(By.ID, "nav-q").send_keys(query)
        self.submit("form.find button[type=submit]")

    def shot(self, name: str, xpath: str = "") -> None:
        """The window, scrolled to the element at ``xpath`` when one is named."""
        if xpath:
            chromium.scroll_to(self.driver, xpath)
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))


async def _admit(stack: Stack, count: int) -> list[str]:
    """Resets asked for through admission's internal API, as support's tools do."""
    directory = RedisDirectory(stack.redis)
    ids = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as session:
        for i in range(count):
            account = Account(f"acct-p{i:03d}", f"player{i:03d}@mail.example")
            await directory.add(f"login-p{i:03d}", account)
            body = {"account_id": account.account_id, "entry_point": "agent", "actor": "t"}
            url = stack.admission + "/internal/v1/recovery-operations"
            async with session.post(url, json=body) as response:
                ids.append((await response.json())["operation_id"])
    return ids


async def _report(stack: Stack, provider: str, accepted: int, throttled: int) -> None:
    """What a sender tells the provider's shared schedule: its accepted sends with a
    reservation, each 429 as feedback (the pacer's scripts, as services/sender/pacer.py)."""
    now = clock.now_ms()
    await PaceAcquire(
        provider=provider, now=now, ceiling=50, burst=5, want=1, accepted=accepted, tuning=Tuning()
    ).run(stack.redis)
    for _ in range(throttled):
        seen = Observation(now, now, throttled=True)
        await PaceFeedback(provider=provider, seen=seen, floor=1, tuning=Tuning()).run(stack.redis)


async def _state(stack: Stack, operation_id: str) -> str:
    key = PartitionKeys.of(operation_id).operation(operation_id)
    return str(await stack.redis.hget(key, "state"))


async def _audit(redis: Redis) -> list[dict[str, str]]:
    return [fields for _, fields in await redis.xrange(AUDIT)]


async def test_two_providers_in_chromium(
    driver: webdriver.Chrome, stack: Stack, tmp_path: Path
) -> None:
    where = os.environ.get("RESETGATE_CONSOLE_SCREENSHOTS")
    shots = Path(where) if where else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    browser = Browser(driver, stack.on_call, shots)
    browser.sign_in("maria")
    assert browser.text("//h1") == "Is anything wrong?"
    # Both providers by name, each with its kind and the partitions it serves.
    assert browser.line("primary").startswith("primary http 0, 1, 2, 3 sending")
    assert browser.line("standby").startswith("standby http none sending")
    assert "default" not in browser.text("//section[h2[@id='lines-h']]")
    # Work arrives and a partition is paused: the counters, the pauses and the lists follow
    # without a reload (console.js refreshes the figures). No sender runs here: the queue
    # stays as admitted.
    await control.pause_partitions(stack.redis, [2], "watching a bounce spike")
    ops = await _admit(stack, 12)
    browser.wait_for(
        lambda: browser.text("//div[@data-count='live']//strong"),
        lambda shown: shown == "12",
        timeout=60,
        reload=False,
    )
    assert "Partition 2 paused" in browser.text("//section[h2[@id='pauses-h']]")
    oldest = browser.text("//section[h2[@id='oldest-h']]")
    waiting = [op for op in ops if await _state(stack, op) == "queued"]
    firsts = {PartitionKeys.of(op).partition: op for op in reversed(waiting)}
    assert firsts and all(op in oldest for op in firsts.values()), oldest
    assert "Nothing is held for review" in browser.text("//section[h2[@id='review-h']]")
    assert "Nothing failed" in browser.text("//section[h2[@id='failed-h']]")
    assert "No email bounced" in browser.text("//section[h2[@id='bounced-h']]")

    # The last hour per provider, drawn: the console samples what the pacer counts (here the
    # pacer's own scripts report what a sender saw) and the oldest eligible operation of the
    # partitions each provider serves; the charts follow without a reload.
    await _report(stack, "primary", accepted=9, throttled=2)
    chart = browser.wait_for(
        lambda: browser.chart("primary"), lambda t: "2 429s in the last hour" in t, 60, False
    )
    assert "9 accepted in the last hour" in chart and "of its horizon" in chart
    assert "no eligible operation" in browser.chart("standby")  # it serves no partition
    assert driver.find_elements(By.CSS_SELECTOR, "tr[data-chart=primary] svg rect.throttled")
    browser.shot("home")
    browser.shot("home-charts", "//section[h2[@id='lines-h']]")

    # A pause of primary (as the sender writes it on an account refusal) shows on its line.
    await control.provider_pause(
        stack.redis, "primary", control.PauseKind.ACCOUNT, "sandbox: sending domain suspended"
    )
    line = browser.wait_for(lambda: browser.line("primary"), lambda t: "paused" in t)
    assert "paused: account" in line and "sending domain suspended" in line
    assert "Resume primary…" in line
    browser.shot("provider-paused")
    # An operation it holds says what it waits for, with the resume beside it.
    held = next(op for op in waiting if PartitionKeys.of(op).partition != 2)
    browser.open(f"/console/operations/{held}")
    assert "waiting for provider primary to resume" in browser.text("//main")
    assert driver.find_elements(By.LINK_TEXT, "Resume primary…")

    # Support reads the pause but cannot resume it: no link, and the page itself refuses.
    support = Browser(driver, stack.support, shots)
    support.sign_in("sam")
    assert "paused: account" in support.line("primary") and "Resume" not in support.line("primary")
    support.open("/console/providers/primary/resume")
    assert support.text("//h1") == "Not allowed"
    # Support finds a player by login from any page: the directory names the account.
    support.open("/console/audit")
    support.find("login-p000", by="login")
    assert support.text("//h1") == "Account" and ops[0] in support.text("//main")
    assert "Found by login" in support.text("//main")
    assert "primary" in (await control.read(stack.redis)).auth_paused

    # On-call resumes it from its line, behind a confirmation that names the effect.
    browser.sign_in("maria")
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.LINK_TEXT, "Resume primary…").click()
    WebDriverWait(driver, 30).until(chromium.replaced(old))
    assert "Every sender starts sending through primary again" in browser.text("//main")
    browser.submit()
    assert "Provider resumed" in browser.text("//main")
    assert "primary" not in (await control.read(stack.redis)).auth_paused
    assert browser.line("primary").startswith("primary http 0, 1, 2, 3 sending")

    # A switch and its rollback from the console move the partitions.
    browser.open("/console/providers/switch")
    driver.find_element(By.ID, "partitions").send_keys("0-1")
    driver.find_element(By.CSS_SELECTOR, "#to option[value=standby]").click()
    driver.find_element(By.ID, "reason").send_keys("primary degraded")
    browser.submit()
    assert "Switched." in browser.text("//main")
    assert browser.line("standby").startswith("standby http 0, 1 ")
    assert (await control.read(stack.redis)).providers == {0: "standby", 1: "standby"}
    browser.open("/console/providers/rollback")
    driver.find_element(By.ID, "reason").send_keys("primary recovered")
    browser.submit()
    assert browser.line("primary").startswith("primary http 0, 1, 2, 3 ")
    assert (await control.read(stack.redis)).providers == {0: "primary", 1: "primary"}

    # Who did what: the resume, the switch and the rollback, each once, with the actor.
    audit = await _audit(stack.redis)
    done = [(a["actor"], a["action"]) for a in audit if a["result"].startswith("done")]
    assert done == [
        ("console:maria", "provider-resume"),
        ("console:maria", "provider-switch"),
        ("console:maria", "provider-rollback"),
    ]
    browser.open("/console/audit?provider=standby")
    trail = browser.text("//main")
    assert "provider-switch" in trail and "provider-rollback" in trail
    assert "provider-resume" not in trail and "console:maria" in trail
    browser.open("/console/audit")
    browser.shot("trail")
