"""Where a contact form goes: queue and priority from the operation's state at routing time.

Pure: the worker gathers the facts (topic, account, admission result), this decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.model import LIVE, NEEDS_ATTENTION, State

ACCOUNT_RECOVERY = "account-recovery"
GENERAL = "general"
NORMAL = "normal"
HIGH = "high"

# A live operation is still doing its job: the case rides along with it (one parked for
# review needs a person, so it does not).
ATTACHED: frozenset[State] = LIVE - {State.REVIEW}


@dataclass(frozen=True, slots=True)
class Facts:
    """What routing knows about one form."""

    topic: str
    account_topic: bool
    account_id: str = ""  # "" when the login matched no account (or none was needed)
    operation_id: str = ""
    state: str = ""  # the operation's state right after admission
    admission: str = ""  # created | converged | cooldown
    delivery: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    queue: str
    priority: str
    attached: bool


def route(facts: Facts) -> Route:
    if not facts.account_topic:
        return Route(GENERAL, NORMAL, attached=False)
    if not facts.operation_id:
        # Unknown login, or a cooldown whose operation has been forgotten: a person looks.
        return Route(ACCOUNT_RECOVERY, NORMAL, attached=False)
    state = _state(facts.state)
    if state in NEEDS_ATTENTION:
        return Route(ACCOUNT_RECOVERY, HIGH, attached=False)
    return Route(ACCOUNT_RECOVERY, NORMAL, attached=state in ATTACHED)


def _state(value: str) -> State | None:
    try:
        return State(value)
    except ValueError:
        return None


def case_fields(
    case_id: str, event_id: str, facts: Facts, where: Route, submitted_ms: int, now_ms: int
) -> dict[str, str]:
    """The support case as written to the stream: ids and states only, no free text."""
    return {
        "case_id": case_id,
        "event_id": event_id,
        "queue": where.queue,
        "priority": where.priority,
        "topic": facts.topic,
        "account_id": facts.account_id,
        "operation_id": facts.operation_id,
        "state": facts.state,
        "attached": "true" if where.attached else "false",
        "admission": facts.admission,
        "delivery": facts.delivery,
        "identity": _identity(facts),
        "submitted_at": str(submitted_ms),
        "routed_at": str(now_ms),
    }


def _identity(facts: Facts) -> str:
    if not facts.account_topic:
        return "not_needed"
    return "account" if facts.account_id else "unknown"
