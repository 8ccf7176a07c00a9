"""Evidence: each attempt records the template revision it sent (a content hash of the
files used), and support sees it in the console's operation view and `resetgate ops show`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.directory import Account, RedisDirectory
from shared.emails.files import Choice, Templates
from shared.model import State
from shared.operations import load_attempts
from shared.settings import Brand
from tests.conftest import CLUSTER
from tests.console.helpers import console, console_settings, get_text, sign_in
from tests.sender.conftest import Stack
from tests.support.sandbox import sent_emails
from tests.templates.helpers import studio_dir, write


def _ops_show(redis_url: str, operation_id: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    env.update(
        RESETGATE_REDIS_URL=redis_url,
        RESETGATE_PARTITIONS="4",
        RESETGATE_REDIS_CLUSTER=str(CLUSTER).lower(),
    )
    command = [sys.executable, "-m", "services.ctl.main", "ops", "show", operation_id]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_each_attempt_records_the_revision_of_the_files_it_sent(
    stack: Stack, tmp_path: Path
) -> None:
    root = studio_dir(tmp_path)
    first = await stack.admit("acct-rev-1")
    async with stack.sender(templates_dir=str(root)):
        await stack.wait_state(first, {State.ACCEPTED})
    write(root, "layout.html", (root / "layout.html").read_text() + "<!-- footer v2 -->\n")
    second = await stack.admit("acct-rev-2")
    async with stack.sender(templates_dir=str(root)):
        await stack.wait_state(second, {State.ACCEPTED})
    [row1] = await load_attempts(stack.redis, first)
    [row2] = await load_attempts(stack.redis, second)
    assert row1.template.startswith("default/en@") and row2.template.startswith("default/en@")
    assert row1.template != row2.template  # the layout changed, so the revision did
    assert row2.template == Templates(root).revision(Choice("", "en"))

    shown = _ops_show(stack.redis_url, second)
    assert f"template={row2.template}" in shown
    async with console(console_settings(stack.redis_url, redis_cluster=CLUSTER)) as http:
        headers = await sign_in(http)
        page = await get_text(http, f"/console/operations/{second}", headers)
    assert "Template revision" in page and f"<code>{row2.template}</code>" in page


async def test_a_brands_from_and_reset_page_reach_the_provider(stack: Stack) -> None:
    operation_id = await stack.admit("acct-brand")
    await RedisDirectory(stack.redis).add(
        "login-acct-brand", Account("acct-brand", "acct-brand@example.com", "fr-CA", "starfall")
    )
    brands = {
        "starfall": Brand(
            name="Starfall",
            email_from="Starfall <no-reply@starfall.example>",
            reset_url_base="https://starfall.example/reset",
        )
    }
    async with stack.sender(brands=brands):
        await stack.wait_state(operation_id, {State.ACCEPTED})
    [email] = await sent_emails(stack.provider_url, operation_id=operation_id)
    assert email["email"]["from"] == "Starfall <no-reply@starfall.example>"
    assert (
        f"https://starfall.example/reset?operation={operation_id}&token=" in email["email"]["text"]
    )
    assert email["email"]["subject"] == "Réinitialisez votre mot de passe Starfall"


async def test_a_template_that_fails_only_at_send_time_defers_unspent(
    stack: Stack, tmp_path: Path
) -> None:
    root = studio_dir(tmp_path)
    # Passes the start-up check (its sample operation id), fails for every real one.
    late = '{% if operation_id != "op-0-01SAMPLE0000000000000000" %}{{ oops }}{% endif %}'
    write(root, "en/body.txt", (root / "en" / "body.txt").read_text() + late)
    operation_id = await stack.admit("acct-late-error")
    async with stack.sender(
        templates_dir=str(root), backoff_base_seconds=30, backoff_cap_seconds=60
    ):
        operation = await stack.wait_state(operation_id, {State.DEFERRED})
    assert operation.attempts == 0 and operation.reason == "template_error"
    assert await sent_emails(stack.provider_url, operation_id=operation_id) == []
