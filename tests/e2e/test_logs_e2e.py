"""Invariant 8 across the running stack: after the e2e flows (this module runs last), no
service's log holds an email address, a reset token or a reset URL; each one is JSON."""

from __future__ import annotations

import re

from tests.e2e.conftest import E2E, poll
from tests.e2e.test_contact_forms_e2e import case_for, submit
from tests.support.sandbox import sent_emails

EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")


async def test_invariant_8_no_address_token_or_link_in_any_log(live: E2E) -> None:
    login = await live.account("e2e-hygiene")
    op = await live.admit("e2e-hygiene")
    await live.until(op, lambda v: v["delivery"] == "delivered")
    await submit(live, "e2e-evt-hygiene", login="e2e-hygiene@example.com")
    await submit(live, "e2e-evt-hygiene-2", login=login, message="call me: me@example.com")
    await case_for(live, "e2e-evt-hygiene-2")
    (email,) = await poll(lambda: sent_emails(live.provider_url, operation_id=op))
    token = re.search(r"token=([A-Za-z0-9_\-]{43})", email["email"]["text"])
    assert token is not None
    for service in live.processes.services.values():
        text = service.logs()
        assert text, f"{service.name} wrote no log"
        assert not EMAIL.search(text), f"{service.name} logged an address"
        assert token.group(1) not in text and "reset-password?" not in text, service.name
        assert service.log_records(), f"{service.name} logs are not JSON lines"
