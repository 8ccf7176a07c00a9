"""Contact-form events: validation, and the dead-letter record of one that cannot be routed.

A contact form can carry free text (and a login that is an email address): nothing from
it is copied anywhere except the fields routing needs, and a dead letter keeps only ids,
the topic and the names of the fields it had, each only when it has its field's shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from shared.clock import to_ms
from shared.ids import valid_account_id
from shared.keys import TRACE_FIELD, TRACESTATE_FIELD
from shared.logging import scrub

MAX_FIELD = 256
MAX_TRACE = 512  # W3C: a tracestate of more than 512 characters may be dropped
ROUTED_FIELDS = ("event_id", "topic", "login", "account_id", "submitted_at")
_EVENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}", re.ASCII)
_TOPIC = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}", re.ASCII)
# The shape of a field name: whatever does not fit may be anything a player typed, so it is
# dropped rather than copied (an account id likewise: shared.ids).
_FIELD_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,32}", re.ASCII)


class Malformed(ValueError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ContactForm:
    entry_id: str
    event_id: str
    topic: str
    login: str
    account_id: str
    submitted_ms: int
    # The form system's W3C trace context, when it wrote one (shared.keys.TRACE_FIELD):
    # the form's routing continues that trace. Malformed, it starts a trace of its own.
    traceparent: str = ""
    tracestate: str = ""


def entry_ms(entry_id: str) -> int:
    head = entry_id.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def parse_submitted(value: str) -> int | None:
    """Epoch milliseconds (digits) or RFC 3339 with a zone -> ms; None when neither."""
    text = value.strip()
    if text.isdigit():
        # ASCII only: "²" is a digit to str.isdigit() and a ValueError to int().
        return int(text) if text.isascii() and len(text) <= 15 else None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return to_ms(when.timestamp()) if when.tzinfo else None


def parse_form(
    entry_id: str, fields: dict[str, str], account_topics: frozenset[str]
) -> ContactForm:
    """The routable form, or :class:`Malformed` with the reason."""
    if any(len(fields.get(name, "")) > MAX_FIELD for name in ROUTED_FIELDS):
        raise Malformed("field_too_long")
    event_id = fields.get("event_id", "").strip()
    if not event_id:
        raise Malformed("missing_event_id")
    if not _EVENT_ID.fullmatch(event_id):
        raise Malformed("bad_event_id")
    topic = fields.get("topic", "").strip().lower()
    if not topic:
        raise Malformed("missing_topic")
    if not _TOPIC.fullmatch(topic):
        raise Malformed("bad_topic")
    login, account_id = fields.get("login", "").strip(), fields.get("account_id", "").strip()
    if topic in account_topics and not (login or account_id):
        raise Malformed("missing_identity")
    if topic in account_topics and account_id and not valid_account_id(account_id):
        raise Malformed("bad_account_id")  # e.g. "../../admin": never a directory path
    # A missing or odd timestamp does not stop a player's request: the entry's time stands in.
    submitted = parse_submitted(fields.get("submitted_at", "")) or entry_ms(entry_id)
    trace = (fields.get(TRACE_FIELD, "")[:MAX_TRACE], fields.get(TRACESTATE_FIELD, "")[:MAX_TRACE])
    return ContactForm(entry_id, event_id, topic, login, account_id, submitted, *trace)


def account_id_or_blank(value: str) -> str:
    """An unverified account id as a case may carry it: its shape, or nothing."""
    return scrub(value) if valid_account_id(value) else ""


def dead_letter(entry_id: str, fields: dict[str, str], reason: str, now_ms: int) -> dict[str, str]:
    """What the dead-letter stream keeps: never a login, an address or free text.

    A value is kept only when it has the shape its field requires (a malformed event id or
    topic is, by definition, anything at all: a sentence, an address); names likewise.
    """
    submitted = fields.get("submitted_at", "").strip()[:64]
    names = {name if _FIELD_NAME.fullmatch(name) else "?" for name in list(fields)[:20]}
    return {
        "reason": reason,
        "entry_id": entry_id,
        "event_id": _kept(_EVENT_ID, fields.get("event_id", "")),
        "topic": _kept(_TOPIC, fields.get("topic", "").lower()),
        "submitted_at": scrub(submitted) if parse_submitted(submitted) is not None else "",
        "fields": ",".join(sorted(names)),
        "dead_at": str(now_ms),
    }


def _kept(shape: re.Pattern[str], value: str) -> str:
    value = value.strip()
    return scrub(value) if shape.fullmatch(value) else ""
