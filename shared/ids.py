"""Identifiers: time-ordered, random, and safe to show to support (they carry no secret)."""

from __future__ import annotations

import functools
import re
import secrets

from shared import clock

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# A ULID as a pattern, from the alphabet itself: 26 Crockford base32 characters (no I, L, O
# or U), the first at most 7 (26 x 5 bits hold the 128 of a ULID).
ULID_PATTERN = f"[0-7][{_CROCKFORD}]{{25}}"

# The shapes every edge checks (internal API, contact forms, CLI, the OpenAPI document), as
# JSON Schema patterns. An account id starts with a letter or digit: ``.`` and ``..`` (and
# anything else a URL or a path would read as a step) are never account ids, and the id goes
# into the directory's URL and into Redis keys.
ACCOUNT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
OPERATION_ID_PATTERN = f"^op-[0-9]{{1,4}}-{ULID_PATTERN}$"
# A provider's message id as the store keeps it (an operation's provider_message_id, the
# message map): RFC 5322's msg-id left part (atext and "."), which holds every provider's
# documented id — SendGrid's X-Message-Id, Postmark's MessageID (a UUID), Mailgun's id
# without its <> and @domain, SES's MessageId — and no space, control character, "@" (no
# address) or anything a terminal acts on.
PROVIDER_MESSAGE_ID_PATTERN = r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,256}$"
ACCOUNT_ID_RULE = "1-128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit"
# Who acted ("agent:maria", "job:nightly-sweep"), stored on the operation as last_actor: a
# name, never an address or a URL (no "@", no "/"), so nothing personal lands in the store.
ACTOR_PATTERN = r"^[A-Za-z0-9._:-]{0,128}$"


def matches(pattern: str, value: str) -> bool:
    """``value`` has the JSON Schema ``pattern``'s shape (whole string, ASCII only)."""
    return _whole(pattern).fullmatch(value) is not None


@functools.cache
def _whole(pattern: str) -> re.Pattern[str]:
    """The compiled body of a JSON Schema pattern (a handful: every one is a constant here;
    the sender checks an operation id several times per email)."""
    # JSON Schema's ``$`` does not match before a trailing newline; Python's does.
    return re.compile(pattern.removeprefix("^").removesuffix("$"), re.ASCII)


def valid_account_id(value: str) -> bool:
    return matches(ACCOUNT_ID_PATTERN, value)


def valid_operation_id(value: str) -> bool:
    return matches(OPERATION_ID_PATTERN, value)


def valid_provider_message_id(value: object) -> bool:
    return isinstance(value, str) and matches(PROVIDER_MESSAGE_ID_PATTERN, value)


def ulid(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32, 26 chars."""
    ms = clock.now_ms() if now_ms is None else now_ms
    value = (ms << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def ulid_ms(value: str) -> int:
    """The milliseconds a ULID was made at (its first 10 characters)."""
    ms = 0
    for char in value[:10]:
        ms = ms * 32 + _CROCKFORD.index(char)
    return ms


def operation_id(partition: int, now_ms: int | None = None) -> str:
    """``op-<partition>-<ulid>``: the partition travels with the id."""
    return f"op-{partition}-{ulid(now_ms)}"


def operation_created_ms(operation_id: str) -> int:
    """When the operation was created: its id carries it, so the store need not."""
    return ulid_ms(operation_id.rsplit("-", 1)[-1])


def attempt_id() -> str:
    return "at-" + ulid()


def case_id() -> str:
    return "case-" + ulid()
