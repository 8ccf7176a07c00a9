"""What every provider's pushed event becomes before it touches the store.

A provider's payload names our operation id (the adapters attach it as custom args,
metadata, a user variable or a message tag), the provider's message id, its own event name
and when it happened. Each provider module maps its vocabulary through one table to a
:class:`Meaning`; everything after that (join, settle, apply) is shared by all of them.
Nothing here keeps an address: parsers read only the fields named below.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from aiohttp import web

from shared import codec
from shared.clock import to_ms
from shared.delivery import MAX_ID_LENGTH
from shared.errors import ApiError
from shared.ids import valid_provider_message_id
from shared.model import Delivery

OPERATION_ID_FIELD = "operation_id"


class Drop(StrEnum):
    """Why an event was counted and dropped (the ``reason`` label of the drop metric)."""

    MALFORMED = "malformed"  # not the documented shape, or a field of the wrong type
    UNKNOWN_TYPE = "unknown_type"  # an event name the provider's table does not know
    IGNORED_TYPE = "ignored_type"  # known, but says nothing about delivery (open, click...)
    NO_OPERATION = "no_operation"  # no operation id attached (not sent by resetgate)
    UNKNOWN_OPERATION = "unknown_operation"  # not an operation id, or no such operation
    OUT_OF_RANGE = "out_of_range"  # dated before the operation existed or in the future
    OTHER_PROVIDER = "other_provider"  # about an operation another configured provider holds


class Acceptance(StrEnum):
    """An event that proves the provider accepted the message but says nothing about
    delivery (SendGrid ``processed``, Mailgun ``accepted``, SES ``Send``): the same fact as
    ``Outcome.ACCEPTED``, learnt from an event instead of the send's answer, so an ambiguous
    attempt it names is settled as ``Resolution.ACCEPTED``."""

    ACCEPTED = "accepted"


Meaning = Delivery | Acceptance | None  # None: known, ignored


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    provider: str
    kind: str  # the provider's event name, from its table (bounded: safe as a label)
    operation_id: str
    message_id: str
    meaning: Delivery | Acceptance
    occurred_ms: int


@dataclass(slots=True)
class Parsed:
    events: list[ProviderEvent] = field(default_factory=list)
    dropped: Counter[Drop] = field(default_factory=Counter)

    def drop(self, reason: Drop) -> None:
        self.dropped[reason] += 1


# The request as a whole is refused; ``status`` and ``error`` go back to the caller.
Rejected = ApiError


def unauthorized(message: str) -> Rejected:
    return Rejected(401, "unauthorized", message)


def bad_request(message: str) -> Rejected:
    return Rejected(400, "invalid_payload", message)


def json_body(body: bytes) -> Any:
    """A webhook's body as JSON, or 400."""
    try:
        return codec.loads(body)
    except codec.JSONDecodeError:
        raise bad_request("the body is not JSON") from None


def text(value: Any) -> str | None:
    """A usable id: a non-empty string within the store's id bound, else None."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH:
        return value
    return None


def epoch_ms(value: Any) -> int | None:
    """Unix seconds (int, float or digits) -> ms; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, int | float) and 0 <= value < 1e11:
        return to_ms(value)
    return None


def iso_ms(value: Any) -> int | None:
    """ISO 8601 with a zone -> ms. Postmark writes seven fractional digits, which
    ``fromisoformat`` takes since 3.11; a naive time is refused (ambiguous)."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return to_ms(when.timestamp()) if when.tzinfo is not None else None


def add_event(
    parsed: Parsed,
    provider: str,
    kind: str,
    meaning: Meaning | None,
    ids: tuple[Any, Any],
    occurred_ms: int | None,
) -> None:
    """The shared tail of every parser: ``meaning`` from the provider's table (absent key:
    unknown type), ``ids`` = (operation id, message id) as found in the payload."""
    if meaning is None:
        parsed.drop(Drop.IGNORED_TYPE)
        return
    operation_id = text(ids[0])
    message_id = ids[1] if valid_provider_message_id(ids[1]) else None  # it may be stored
    if operation_id is None:
        parsed.drop(Drop.NO_OPERATION)
    elif message_id is None or occurred_ms is None:
        parsed.drop(Drop.MALFORMED)
    else:
        parsed.events.append(
            ProviderEvent(provider, kind, operation_id, message_id, meaning, occurred_ms)
        )


def check_fresh(
    timestamp: Any, max_age_seconds: float, now_ms: int, retry_horizon_seconds: float = 0.0
) -> None:
    """Raise 401 unless a signed timestamp (Unix seconds) is within ``max_age_seconds`` of
    now, either way: an old one is a replay, a future one a forgery or a broken clock.
    ``retry_horizon_seconds``: a provider that retries a failed POST with the signature it
    first made (Mailgun) is believed that far back, where a replay guard (its token) refuses
    a second use."""
    signed = epoch_ms(timestamp)
    if signed is None:
        raise unauthorized("the signed timestamp is missing or not Unix seconds")
    newest, oldest = to_ms(max_age_seconds), to_ms(max(max_age_seconds, retry_horizon_seconds))
    if signed - now_ms > newest or now_ms - signed > oldest:
        raise unauthorized("the signed timestamp is too old or in the future")


@dataclass(frozen=True, slots=True)
class Receipt:
    parsed: Parsed
    replay_key: str = ""  # remembered before applying; forgotten again if applying fails


# One source's check of a request and its body: each webhook kind's module has a
# ``receiver(source, settings, client)`` that makes it (inbound/webhooks.py finds it through
# the kind's registry entry).
Receive = Callable[[web.Request, bytes], Awaitable[Receipt]]
