"""Reconciliation of ambiguous attempts: decided from the provider's capabilities.

An attempt is ambiguous when the request may have reached the provider but no answer did
(a timeout or a dropped connection after the write, an undocumented 2xx, or a sender that
died mid-attempt). What may be done next depends on what the provider can do, never on
its name (:func:`plan`):

- a trustworthy lookup (settled, and inside how far back it can be believed) -> ask:
  found -> accepted; not found -> one replay with the same id, key and token;
- a lookup not yet settled -> ask once at once: "found" is proof whenever it comes (the
  provider can only find a send it took), "not found" is no answer yet and the attempt
  waits for the settled lookup;
- a *found-only* lookup (the provider does not document it as complete, see
  ``LookupTrust.proves_absence``) -> ask once at once and once more when the event window
  closes: "found" -> accepted; "not found" is never permission to send -> ``review``;
- a native idempotency key still inside its retention -> one replay with the same key
  (the provider deduplicates it);
- neither -> the attempt stays ambiguous while an event may still prove acceptance, and
  is held for review once the event window has closed.

Once a key's retention has passed, "not found" is unknown, never permission to send.
``RESETGATE_AMBIGUOUS_POLICY=review`` holds every ambiguous attempt that would be
replayed. Nothing here mints a token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from services.poller import traced
from shared import clock, metrics
from shared.clock import to_seconds
from shared.keys import PartitionKeys
from shared.logging import event
from shared.model import Operation, Outcome, State
from shared.operations import load_attempts, load_operation
from shared.ownership import owners as owners  # the reconciler's: one rule for the owner
from shared.providers.base import Capabilities, LookupTrust, Provider, ProviderUnavailable
from shared.redis import RedisClient
from shared.scripts.attempts import ResolveAmbiguous, Settled
from shared.settings import PolicySettings

log = logging.getLogger(__name__)
# Ledger outcomes after which the provider surely did not accept that attempt.
_NO_REPLAY = "replay spent, too late, or policy is review"
_REFUSED = frozenset({Outcome.THROTTLED, Outcome.TRANSIENT, Outcome.PERMANENT, Outcome.AUTH})


class Resolution(StrEnum):
    """What the reconciler decides about an ambiguous attempt. ``ACCEPTED``: the provider
    had taken the message, the same fact as ``Outcome.ACCEPTED`` for an attempt it answered
    and the operation's ``State.ACCEPTED`` that follows (the value is a metrics label)."""

    ACCEPTED = "accepted"
    REPLAY = "replay"
    REVIEW = "review"
    WAIT = "wait"  # nothing to do yet: still ambiguous


class Step(StrEnum):
    LOOK_UP = "look_up"
    LOOK_UP_EARLY = "look_up_early"  # only "found" counts
    LOOK_UP_LAST = "look_up_last"  # found-only, window closed: found -> accepted, else review
    REPLAY = "replay"
    WAIT = "wait"
    REVIEW = "review"


@dataclass(frozen=True, slots=True)
class LookupThrottled(Exception):
    retry_after: str | None
    server_date: str | None


@dataclass(frozen=True, slots=True)
class Situation:
    """What the policy needs to know about one ambiguous operation, in seconds."""

    age: float  # since the earliest attempt the provider may have accepted
    window_closed: bool  # no event can be awaited any more
    asked_early: bool = True  # the unsettled lookup was already asked (or may not be)


def key_alive(caps: Capabilities, age: float) -> bool:
    return caps.native_key and age < caps.idempotency_retention_seconds


def lookup_trusted(caps: Capabilities, age: float) -> bool:
    """A lookup's "not found" means "never accepted": a lookup that proves absence, settled
    (or a live key makes a premature answer harmless), not older than it can see."""
    trust = caps.lookup
    if trust is None or not trust.proves_absence or age >= trust.horizon_seconds:
        return False
    return age >= trust.settle_seconds or key_alive(caps, age)


def _found_only(trust: LookupTrust, situation: Situation) -> Step:
    """Only "found" means anything: ask at once, wait for events, ask a last time when the
    window closes, and hold for review what was still not found."""
    if situation.age >= trust.horizon_seconds:
        return Step.REVIEW if situation.window_closed else Step.WAIT
    if situation.window_closed:
        return Step.LOOK_UP_LAST
    return Step.WAIT if situation.asked_early else Step.LOOK_UP_EARLY


def plan(caps: Capabilities, situation: Situation) -> Step:
    if caps.lookup is not None and not caps.lookup.proves_absence and not caps.native_key:
        return _found_only(caps.lookup, situation)
    if lookup_trusted(caps, situation.age):
        return Step.LOOK_UP
    if key_alive(caps, situation.age):
        return Step.REPLAY
    if caps.lookup is not None and situation.age < caps.lookup.settle_seconds:
        # The lookup will become trustworthy; a "found" before then already is.
        return Step.WAIT if situation.asked_early else Step.LOOK_UP_EARLY
    return Step.REVIEW if situation.window_closed else Step.WAIT


def no_wait() -> float:
    return 0.0


@dataclass(frozen=True, slots=True)
class Asking:
    """How the caller lets reconciliation ask the provider.

    ``early``: one lookup may be made before it is trustworthy (the poller allows it once
    per attempt); ``permit()``: 0 when a lookup may be made now, else the seconds to wait
    (the poller's request budget), checked only when a lookup is really about to be made.
    """

    early: bool = False
    permit: Callable[[], float] = no_wait


@dataclass(frozen=True, slots=True)
class BudgetWait(Exception):
    """No lookup now: the caller's budget says wait this many seconds."""

    seconds: float


async def situation(
    client: RedisClient, operation: Operation, settings: PolicySettings, now: int, early: bool
) -> Situation:
    attempts = await load_attempts(client, operation.operation_id)
    maybe = [a.started_at for a in attempts if a.outcome not in _REFUSED] or [now]
    first = min(maybe)
    window = settings.observation_window_ms
    return Situation(
        age=to_seconds(max(0, now - first)),
        window_closed=now >= first + window,
        asked_early=not early,
    )


async def lookup(
    provider: Provider,
    operation_id: str,
    permit: Callable[[], float] = no_wait,
    trace: tuple[str, str] = ("", ""),
) -> str:
    """The provider's message id for this operation, or "" if it has none. ``trace``: the
    operation's traceparent and tracestate, which the lookup's span links to."""
    wait = permit()
    if wait:
        raise BudgetWait(wait)
    with traced.lookup(provider.name, operation_id, trace) as span:
        result = await provider.lookup(operation_id)
        traced.looked_up(span, result.status, result.message_id)
    metrics.poll_requests.labels(provider.name, "lookup", str(result.status)).inc()
    if result.status == 429:
        metrics.poll_throttled.labels(provider.name, "lookup").inc()
        raise LookupThrottled(result.retry_after, result.server_date)
    if result.status != 200:
        raise ProviderUnavailable(f"lookup answered {result.status}")
    return result.message_id


def _replay_or_review(operation: Operation, settings: PolicySettings, now: int) -> Resolution:
    if settings.ambiguous_policy == "review" or operation.replays >= 1:
        return Resolution.REVIEW
    return Resolution.REVIEW if now >= operation.horizon_at else Resolution.REPLAY


async def decide(
    client: RedisClient,
    provider: Provider,
    settings: PolicySettings,
    operation: Operation,
    asking: Asking,
) -> tuple[Resolution, str, str, str]:
    """(resolution, message id, reason, pin_for) for one ambiguous operation, asking
    ``provider`` only if it holds the attempt. ``pin_for`` (a replay's): "replay" when a
    lookup proved it unsent, "proof" when only the provider's key can deduplicate it."""
    owner = operation.provider
    if owner and owner != provider.name:
        # Only the provider that holds the attempt can say whether it was accepted: asking
        # another one would find nothing and replay it, a second email.
        return Resolution.WAIT, "", f"waiting: held by {owner}, not {provider.name}", ""
    now = clock.now_ms()
    where = await situation(client, operation, settings, now, asking.early)
    step = plan(provider.capabilities, where)
    if step in _NOT_ASKED:
        return _NOT_ASKED[step]
    message_id = ""
    if step is not Step.REPLAY:
        trace = (operation.traceparent, operation.tracestate)
        message_id = await lookup(provider, operation.operation_id, asking.permit, trace)
    if message_id:
        return Resolution.ACCEPTED, message_id, "reconciled: provider had accepted it", ""
    if step in _NOT_FOUND:
        return _NOT_FOUND[step]
    decision = _replay_or_review(operation, settings, now)
    why = "not found" if step is Step.LOOK_UP else "key still retained"
    then = "one replay, same key" if decision is Resolution.REPLAY else _NO_REPLAY
    pin_for = "replay" if step is Step.LOOK_UP else "proof"
    return decision, "", f"reconciled: {why}; {then}, at {provider.name}", pin_for


_NOT_ASKED = {
    Step.WAIT: (
        Resolution.WAIT,
        "",
        "waiting: lookup not yet trustworthy, or an event may come",
        "",
    ),
    Step.REVIEW: (
        Resolution.REVIEW,
        "",
        "unknown: no trustworthy lookup or key; event window closed",
        "",
    ),
}
# What "not found" means where it proves nothing.
_NOT_FOUND = {
    Step.LOOK_UP_EARLY: (
        Resolution.WAIT,
        "",
        "waiting: not found yet; lookup not yet trustworthy",
        "",
    ),
    Step.LOOK_UP_LAST: (
        Resolution.REVIEW,
        "",
        "unknown: a found-only lookup did not find it; event window closed",
        "",
    ),
}


async def reconcile(
    client: RedisClient,
    provider: Provider,
    settings: PolicySettings,
    operation_id: str,
    asking: Asking = Asking(),
) -> Resolution | None:
    """Settle one ambiguous operation; None when it was no longer ambiguous. Raises
    :class:`BudgetWait` when a lookup was due but ``asking.permit`` refused it."""
    operation = await load_operation(client, operation_id)
    if operation is None or operation.state is not State.AMBIGUOUS:
        await client.zrem(PartitionKeys.of(operation_id).ambiguous, operation_id)
        return None
    decision, message_id, reason, pin_for = await decide(
        client, provider, settings, operation, asking
    )
    if decision is Resolution.WAIT:
        return decision
    now = clock.now_ms()
    code, _ = await ResolveAmbiguous(
        operation_id=operation_id,
        now=now,
        decision=decision,
        message_id=message_id,
        observe_until=now + settings.observation_window_ms,
        reason=reason,
        retention_ms=settings.settled_retention_ms,
        # The replay goes through the provider that decided it, never the partition's
        # current one: after a lookup for its next attempt only (proven unsent there), after
        # a same-key replay for good (only that provider can deduplicate the key).
        pin=provider.name,
        pin_for=pin_for,
    ).run(client)
    if code is not Settled.OK:
        return None
    await _record(client, provider.name, operation_id, decision, now)
    return decision


async def _record(
    client: RedisClient, provider: str, operation_id: str, decision: Resolution, now: int
) -> None:
    outcome = decision.value if decision != "replay" else "replayed"
    metrics.reconciliations.labels(provider, outcome).inc()
    ambiguous_at = int(
        await client.hget(PartitionKeys.of(operation_id).operation(operation_id), "ambiguous_at")
        or now
    )
    metrics.reconciliation_lag.observe(to_seconds(max(0, now - ambiguous_at)))
    event(
        log,
        logging.INFO,
        "ambiguous attempt reconciled",
        operation_id=operation_id,
        provider=provider,
        decision=str(decision),
    )


async def due_ambiguous(
    client: RedisClient, partition: int, *, older_than_ms: int = 0, limit: int = 100
) -> list[str]:
    """Ambiguous operations of a partition that have waited at least ``older_than_ms``."""
    cutoff = clock.now_ms() - older_than_ms
    ids = await client.zrangebyscore(
        PartitionKeys(partition).ambiguous, "-inf", cutoff, start=0, num=limit
    )
    return [str(i) for i in ids]
