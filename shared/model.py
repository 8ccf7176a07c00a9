"""The recovery operation: its states, the legal transitions, and its stored shape.

Transitions are declared once, here. The Lua scripts that write a state get these tables
rendered into them at load time (shared/scripts, "-- @states"), and
tests/core/test_transitions.py runs every state-writing script from every state and checks
each (before -> after) pair against :data:`TRANSITIONS`; docs/architecture.md draws the
diagram from it (tools/state_diagram.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared import codec
from shared.ids import operation_created_ms
from shared.keys import partition_of_operation


class State(StrEnum):
    QUEUED = "queued"
    ATTEMPTING = "attempting"
    DEFERRED = "deferred"
    ACCEPTED = "accepted"
    FAILED = "failed"
    EXHAUSTED = "exhausted"
    EXPIRED = "expired"
    AMBIGUOUS = "ambiguous"
    REVIEW = "review"
    QUARANTINED = "quarantined"


class EntryPoint(StrEnum):
    """Who asked: every entry point converges on the account's one live operation."""

    PUBLIC = "public"  # the game's "Forgot password?" form and its resend clicks
    RESEND = "resend"
    CONTACT_FORM = "contact_form"
    AGENT = "agent"
    AUTOMATION = "automation"


# The operation hash counts requests per entry point in fields "ep:<entry point>".
ENTRY_POINT_PREFIX = "ep:"


class Outcome(StrEnum):
    """The class of one attempt, as the provider contract defines them."""

    IN_FLIGHT = "in_flight"
    ACCEPTED = "accepted"
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    AMBIGUOUS = "ambiguous"
    AUTH = "auth"


class Delivery(StrEnum):
    UNKNOWN = "unknown"
    DELIVERED = "delivered"
    DEFERRED = "deferred"
    BOUNCED = "bounced"
    COMPLAINED = "complained"
    REJECTED = "rejected"


TERMINAL: frozenset[State] = frozenset(
    {State.ACCEPTED, State.FAILED, State.EXHAUSTED, State.EXPIRED}
)
LIVE: frozenset[State] = frozenset(State) - TERMINAL

# Operations a support case escalates: delivery failed its policy, or a person must look.
NEEDS_ATTENTION: frozenset[State] = frozenset(
    {State.FAILED, State.EXHAUSTED, State.EXPIRED, State.REVIEW}
)

_ANY_LIVE_END = {State.EXHAUSTED, State.EXPIRED, State.QUARANTINED}

TRANSITIONS: dict[State, frozenset[State]] = {
    # QUEUED -> REVIEW: the refusals guard only, as DEFERRED -> REVIEW below.
    State.QUEUED: frozenset({State.ATTEMPTING, State.REVIEW, *_ANY_LIVE_END}),
    State.ATTEMPTING: frozenset(
        {
            State.ACCEPTED,
            State.DEFERRED,
            State.QUEUED,  # credentials rejected: the operation waits, it does not fail
            State.FAILED,
            State.AMBIGUOUS,
            State.EXHAUSTED,
            State.EXPIRED,
        }
    ),
    # QUEUED/DEFERRED -> REVIEW: the refusals guard only (hold_refused.lua): the operations
    # whose undocumented refusals tripped it wait for a person, not for the queue.
    State.DEFERRED: frozenset({State.QUEUED, State.REVIEW, *_ANY_LIVE_END}),
    State.AMBIGUOUS: frozenset({State.ACCEPTED, State.QUEUED, State.REVIEW, *_ANY_LIVE_END}),
    State.REVIEW: frozenset(
        {State.QUEUED, State.ACCEPTED, State.FAILED, State.EXPIRED, State.QUARANTINED}
    ),
    State.QUARANTINED: frozenset({State.QUEUED, State.EXPIRED}),
    State.ACCEPTED: frozenset(),
    State.FAILED: frozenset(),
    State.EXHAUSTED: frozenset(),
    State.EXPIRED: frozenset(),
}


# An operator may quarantine an operation the table lets reach QUARANTINED, and release a
# held one (quarantined, or parked for review) back to the send queue.
QUARANTINABLE: frozenset[State] = frozenset(
    state for state, targets in TRANSITIONS.items() if State.QUARANTINED in targets
)
RELEASABLE: frozenset[State] = frozenset({State.QUARANTINED, State.REVIEW})
# The ends a person looks into afterwards: indexed (shared.keys ``finished``) by the script
# that makes the move, for the console's counts and "recently failed or exhausted" list.
RECENTLY_FAILED: frozenset[State] = frozenset({State.FAILED, State.EXHAUSTED})

# Closing a held operation ends it as failed, without sending: an operator decided that the
# email under review must not go (and the account asks again if it still needs one).
CLOSED_AS: State = State.FAILED
CLOSABLE: frozenset[State] = frozenset(
    state for state in RELEASABLE if CLOSED_AS in TRANSITIONS[state]
)


def on_token_consumed(state: State) -> State | None:
    """Where a live operation goes when its reset token is used (None: it stays).

    A used token proves an email carrying it arrived; an operation that may have sent one
    (attempting, ambiguous, review) is therefore accepted. One that the table does not let
    become accepted (queued, deferred, quarantined: no attempt of it is known to have left)
    is closed as expired: the token is spent, so nothing more may be sent for it, and
    ``token_consumed_at`` records why.
    """
    targets = TRANSITIONS[state]
    for goal in (State.ACCEPTED, State.EXPIRED):
        if goal in targets:
            return goal
    return None


def _int(value: Any) -> int:
    return int(value) if value not in (None, "", b"") else 0


# Stored only when set: a missing field reads as 0 or "" (the scripts write nothing at its
# default and delete a field that returns to it), which keeps the hash small and listpack.
_INT_FIELDS = (
    "token_expires_at",
    "horizon_at",
    "attempts",
    "next_attempt_at",
    "token_consumed_at",
    "last_status",
    "delivery_observed_at",
    "observation_closed_at",
    "replays",
    "throttles",
)
_TEXT_FIELDS = (
    "last_outcome",
    "retry_after_source",
    "reason",
    "provider",
    "provider_message_id",
    "template_revision",
    "traceparent",  # shared.keys.TRACE_FIELD
    "tracestate",  # shared.keys.TRACESTATE_FIELD
    "pinned",
)


@dataclass(slots=True)
class Operation:
    """The non-secret operation hash, decoded. No address, token or URL lives here.

    Not stored, because derivable: ``operation_id`` (the key), ``partition`` and
    ``created_at`` (both in the id, ``op-<p>-<ulid>``), and a fresh operation's
    ``next_attempt_at`` (it is due from its creation).
    """

    operation_id: str
    account_id: str
    partition: int
    state: State
    created_at: int
    token_kid: str
    token_expires_at: int
    horizon_at: int
    attempts: int = 0
    next_attempt_at: int = 0
    token_consumed_at: int = 0
    last_status: int = 0
    last_outcome: str = ""
    retry_after_source: str = ""
    reason: str = ""
    provider: str = ""
    provider_message_id: str = ""
    template_revision: str = ""
    # A replay decided at a provider is sent only through it (resolve_ambiguous.lua).
    pinned: str = ""
    delivery: Delivery = Delivery.UNKNOWN
    delivery_observed_at: int = 0
    observation_closed_at: int = 0
    replays: int = 0
    throttles: int = 0  # attempts the provider throttled: refunded, never in ``attempts``
    traceparent: str = ""  # the admission's W3C trace context ("" when traces were off)
    tracestate: str = ""  # and its vendors' entries, when the caller sent some
    entry_points: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_hash(cls, operation_id: str, raw: dict[str, str]) -> Operation:
        """Decode the hash stored under ``operation_id`` (raises ValueError if malformed)."""
        operation = cls(
            operation_id=operation_id,
            account_id=raw["account_id"],
            partition=partition_of_operation(operation_id),
            state=State(raw["state"]),
            created_at=operation_created_ms(operation_id),
            token_kid=raw.get("token_kid", ""),
            token_expires_at=0,
            horizon_at=0,
            delivery=Delivery(raw.get("delivery") or Delivery.UNKNOWN),
            entry_points={
                k.removeprefix(ENTRY_POINT_PREFIX): int(v)
                for k, v in raw.items()
                if k.startswith(ENTRY_POINT_PREFIX)
            },
        )
        for name in _INT_FIELDS:
            setattr(operation, name, _int(raw.get(name)))
        for name in _TEXT_FIELDS:
            setattr(operation, name, raw.get(name, ""))
        if operation.state is State.QUEUED and not operation.next_attempt_at:
            operation.next_attempt_at = operation.created_at
        return operation

    def public_view(self) -> dict[str, Any]:
        """What support and on-call see: everything but internals they cannot act on."""
        return {
            "operation_id": self.operation_id,
            "account_id": self.account_id,
            "partition": self.partition,
            "state": str(self.state),
            "created_at": self.created_at,
            "attempts": self.attempts,
            "throttles": self.throttles,
            "next_attempt_at": self.next_attempt_at or None,
            "token_expires_at": self.token_expires_at,
            "token_consumed_at": self.token_consumed_at or None,
            "horizon_at": self.horizon_at,
            "last_status": self.last_status or None,
            "last_outcome": self.last_outcome or None,
            "retry_after_source": self.retry_after_source or None,
            "reason": self.reason or None,
            "provider": self.provider or None,
            "provider_message_id": self.provider_message_id or None,
            "delivery": str(self.delivery),
            "delivery_observed_at": self.delivery_observed_at or None,
            "observation_closed_at": self.observation_closed_at or None,
            "entry_points": self.entry_points,
        }


# The attempt ledger stores each row as a JSON array in this order (a value at its default,
# "" or 0, is null; trailing nulls are cut): less than half the same row as an object.
# The scripts get the positions rendered from this tuple (shared/scripts, "-- @ledger").
# ``number`` is the attempt count it used, not its position: a refunded attempt (no email
# could have left) gives its number to the next one.
LEDGER_FIELDS: tuple[str, ...] = (
    "attempt_id",
    "started_at",
    "number",
    "consumer",
    "outcome",
    "ended_at",
    "http_status",
    "decision",
    "reason",
    "retry_at",
    "retry_after_source",
    "reconciled",
    "reconciled_at",
    "provider",  # the provider this attempt went to
    "template",  # the template revision it sent (shared.emails: content hash or hosted id)
)


@dataclass(slots=True)
class Attempt:
    """One row of the append-only attempt ledger."""

    attempt_id: str
    started_at: int
    outcome: str = Outcome.IN_FLIGHT
    ended_at: int = 0
    http_status: int = 0
    decision: str = ""
    retry_at: int = 0
    reason: str = ""
    consumer: str = ""
    number: int = 0
    retry_after_source: str = ""
    reconciled: str = ""
    reconciled_at: int = 0
    provider: str = ""
    template: str = ""

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Attempt:
        return cls(**{k: raw[k] for k in cls.__slots__ if k in raw})

    @classmethod
    def decode(cls, row: str | bytes, position: int) -> Attempt:
        """One stored row (the ``position``-th, from 1, for a row that lacks its number)
        -> Attempt; raises ValueError if it is not a row."""
        raw = codec.loads(row)
        if not isinstance(raw, list):
            raise ValueError("an attempt row is a JSON array")
        values = {name: v for name, v in zip(LEDGER_FIELDS, raw, strict=False) if v is not None}
        return cls.from_dict({"number": position, **values})
