"""Contact-form events: validation, and the dead-letter record of one that cannot be routed.

A contact form can carry free text (and a login that is an email address): nothing from
it is copied anywhere except the fields routing needs, and a dead letter keeps only ids,
the topic and the names of the fields it had, each truncated and scrubbed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from shared.logging import scrub

MAX_FIELD = 256
ROUTED_FIELDS = ("event_id", "topic", "login", "account_id", "submitted_at")
_EVENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}", re.ASCII)
_TOPIC = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}", re.ASCII)


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


def entry_ms(entry_id: str) -> int:
    head = entry_id.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def parse_submitted(value: str) -> int | None:
    """Epoch milliseconds (digits) or RFC 3339 with a zone -> ms; None when neither."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return int(when.timestamp() * 1000) if when.tzinfo else None


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
    # A missing or odd timestamp does not stop a player's request: the entry's time stands in.
    submitted = parse_submitted(fields.get("submitted_at", "")) or entry_ms(entry_id)
    return ContactForm(entry_id, event_id, topic, login, account_id, submitted)


def dead_letter(entry_id: str, fields: dict[str, str], reason: str, now_ms: int) -> dict[str, str]:
    """What the dead-letter stream keeps: never a login, an address or free text."""

    def safe(name: str, limit: int) -> str:
        return scrub(fields.get(name, "")[:limit])

    names = ",".join(sorted(scrub(k[:32]) for k in list(fields)[:20]))
    return {
        "reason": reason,
        "entry_id": entry_id,
        "event_id": safe("event_id", 128),
        "topic": safe("topic", 64),
        "submitted_at": safe("submitted_at", 64),
        "fields": names,
        "dead_at": str(now_ms),
    }
