"""The directory's address is one mailbox or nothing is sent (issue 34, item 5).

A directory record holding ``a@x, b@y, c@z`` sent one reset link to three people, and a CR
or LF was forwarded to the provider. Now the sender checks the address before it composes
(shared.mailbox) and fails the operation with a reason naming the directory; an ordinary
and an internationalised address still go out, so the check refuses nobody it should not.
"""

from __future__ import annotations

import pytest

from shared import mailbox
from shared.directory import Account, RedisDirectory
from shared.model import State
from shared.operations import load_operation
from tests.sender.conftest import Stack
from tests.support.sandbox import sent_emails

REFUSED = [
    "a@x.example, b@y.example, c@z.example",  # three recipients in one record
    "a@x.example\r\nBcc: b@y.example",  # a header of its own
    "a@x.example\n",
    "a@x.example\x00",
    '"a,b"@x.example',  # a quoted local part: one mailbox to RFC 5322, a comma to a parser
    "a@[192.0.2.1]",
    "a b@x.example",
    "a@x.example\u202e",  # a bidi override
    "a..b@x.example",
    "a@-x.example",
    "",
    "x" * 65 + "@x.example",
]
ACCEPTED = [
    "player.one+reset@example.com",
    "o'brien@example.co.uk",
    "josé@exämple.de",  # RFC 6532: UTF-8 in both parts
    "用户@例子.广告",
    "a@localhost",
]


@pytest.mark.parametrize("address", REFUSED)
def test_an_address_that_is_not_one_mailbox_is_refused(address: str) -> None:
    assert mailbox.problem(address)


@pytest.mark.parametrize("address", ACCEPTED)
def test_an_ordinary_or_internationalised_mailbox_passes(address: str) -> None:
    assert mailbox.problem(address) == ""


async def _admit_with(stack: Stack, account_id: str, address: str) -> str:
    operation_id = await stack.admit(account_id)
    await RedisDirectory(stack.redis).add(f"login-{account_id}", Account(account_id, address))
    return operation_id


@pytest.mark.parametrize(
    "address", ["a@x.example, b@y.example, c@z.example", "a@x.example\r\nBcc: b@y.example"]
)
async def test_a_directory_record_with_several_recipients_or_crlf_fails_and_sends_nothing(
    stack: Stack, address: str
) -> None:
    operation_id = await _admit_with(stack, "acct-bad", address)
    async with stack.sender():
        operation = await stack.wait_state(operation_id, {State.FAILED, State.ACCEPTED})
    assert operation.state is State.FAILED
    assert operation.reason == "directory_address_invalid"
    assert await sent_emails(stack.provider_url, operation_id=operation_id) == []


async def test_an_internationalised_address_is_sent(stack: Stack) -> None:
    operation_id = await _admit_with(stack, "acct-intl", "josé@exämple.de")
    async with stack.sender():
        operation = await stack.wait_state(operation_id, {State.FAILED, State.ACCEPTED})
    assert operation.state is not State.FAILED
    sent = await sent_emails(stack.provider_url, operation_id=operation_id)
    assert len(sent) == 1


async def test_a_failed_check_is_logged_without_the_address(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    operation_id = await _admit_with(stack, "acct-log", "a@x.example, b@y.example")
    async with stack.sender():
        await stack.wait_state(operation_id, {State.FAILED})
    logged = [r for r in caplog.records if r.getMessage() == "directory address refused; not sent"]
    assert logged and "x.example" not in str(logged[0].__dict__)
    stored = await load_operation(stack.redis, operation_id)
    assert stored is not None and "x.example" not in repr(stored)
