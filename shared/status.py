"""Where each partition and each provider stand: what ``resetgate ops status`` prints and the
console's providers page shows. Read-only; one row per partition, never an average.

Counts and rates, not operations: a concrete operation (its ledger, the oldest live ones,
those held for review) is ``shared.operation_views``; the pauses shown here are read from the
operator's switches, which ``shared.control`` reads and writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared import clock, codec, control
from shared.keys import RECENT_KEEP_MS, RECENT_MAX, SEND_GROUP, PartitionKeys, provider_pacing
from shared.preflight.store import Checked
from shared.preflight.store import read as read_checks
from shared.redis import RedisClient


async def in_flight(client: RedisClient, partition: int) -> int:
    """Send jobs of the partition a sender has read and not yet acknowledged."""
    try:
        pending = await client.xpending(PartitionKeys(partition).send, SEND_GROUP)
    except Exception:  # no stream or no group yet: nothing is in flight
        return 0
    return int(pending.get("pending") or 0) if pending else 0


def _pause_note(state: control.ControlState, partition: int) -> dict[str, Any]:
    note = state.paused_notes.get(partition)
    return note if note is not None else {}


async def partition_status(
    client: RedisClient, partition: int, state: control.ControlState
) -> dict[str, Any]:
    pk = PartitionKeys(partition)
    pipe = client.pipeline(transaction=False)
    pipe.xlen(pk.send)
    pipe.zcard(pk.due)
    pipe.zcard(pk.ambiguous)
    pipe.zcard(pk.review)
    pipe.zcard(pk.live)
    send, due, ambiguous, review, live = await pipe.execute()
    busy = await in_flight(client, partition)
    paused = partition in state.paused
    note = _pause_note(state, partition)
    return {
        "partition": partition,
        "paused": paused,
        "paused_since": note.get("since"),
        "paused_reason": note.get("reason"),
        # Paused with attempts still finishing: senders stop taking new work, these settle.
        "draining": paused and busy > 0,
        "send": send,
        "in_flight": busy,
        "due": due,
        "ambiguous": ambiguous,
        "review": review,
        "live": live,
    }


async def partitions_status(
    client: RedisClient, partitions: int, state: control.ControlState
) -> list[dict[str, Any]]:
    return [await partition_status(client, p, state) for p in range(partitions)]


@dataclass(frozen=True, slots=True)
class ProviderStatus:
    name: str
    rate: float  # sends/s the shared bucket allows right now
    blocked_until: int | None  # ms; set while a 429's Retry-After holds every sender
    throttled_total: int  # 429s recorded by the pacer since the store began
    last_throttled_at: int | None
    # the provider pause (shared.control): since, kind, reason, status, key fingerprint
    auth_paused: dict[str, Any] | None

    def view(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "rate": self.rate,
            "blocked_until": self.blocked_until,
            "throttled_total": self.throttled_total,
            "last_throttled_at": self.last_throttled_at,
            "auth_paused": self.auth_paused,
        }


def _number(raw: dict[Any, Any], name: str) -> float:
    try:
        return float(raw.get(name) or 0)
    except ValueError:
        return 0.0


async def provider_status(
    client: RedisClient, provider: str, state: control.ControlState
) -> ProviderStatus:
    pacing = await client.hgetall(provider_pacing(provider))
    blocked = int(_number(pacing, "blocked_until"))
    last = int(_number(pacing, "last_throttled_at"))
    return ProviderStatus(
        name=provider,
        rate=_number(pacing, "rate"),
        blocked_until=blocked if blocked > clock.now_ms() else None,
        throttled_total=int(_number(pacing, "throttled_total")),
        last_throttled_at=last or None,
        auth_paused=state.auth_paused.get(provider),
    )


def describe_auth(status: ProviderStatus) -> str:
    """The provider pause in one line: its kind and the provider's reason, quoted."""
    note = status.auth_paused
    if not note:
        return "ok"
    reason = control.sanitise(str(note.get("reason") or ""))
    return (
        f"PAUSED kind={control.pause_kind(note)} status={note.get('status') or '-'} "
        f"reason={codec.dumps_str(reason)}"
    )


@dataclass(frozen=True, slots=True)
class Pacing:
    """What the provider is really taking, from the shared pacing schedule, and a pause
    that lifts itself (a daily quota)."""

    accepting: float | None  # sends/s the provider accepted since the last cut (measured)
    settled: float | None  # the rate the last measured cut settled on
    next_slot_at: int | None  # ms; when the schedule's next free slot is
    paused_until: int | None  # ms; a quota pause's end (``shared.control.quota_pause``)

    def view(self) -> dict[str, Any]:
        return {
            "accepting_rate": self.accepting,
            "settled_rate": self.settled,
            "next_slot_at": self.next_slot_at,
            "paused_until": self.paused_until,
        }


async def pacing_status(client: RedisClient, provider: str, state: control.ControlState) -> Pacing:
    pacing = await client.hgetall(provider_pacing(provider))
    now = clock.now_ms()
    since, accepted = _number(pacing, "since"), _number(pacing, "accepted")
    accepting = accepted * 1000 / (now - since) if since and now - since >= 1000 else None
    tat = int(_number(pacing, "tat"))
    note = state.auth_paused.get(provider) or {}
    until = note.get("until") if note.get("kind") == control.PauseKind.QUOTA else None
    return Pacing(
        accepting=round(accepting, 3) if accepting is not None else None,
        settled=_number(pacing, "good") or None,
        next_slot_at=tat if tat > now else None,
        paused_until=until if isinstance(until, int) and until > now else None,
    )


def describe_pacing(pacing: Pacing, when: Callable[[int | None], str]) -> str:
    """One line: what the provider is accepting, the next slot, a quota pause's end."""
    accepting = f"{pacing.accepting:.2f}/s" if pacing.accepting is not None else "-"
    settled = f"{pacing.settled:.2f}/s" if pacing.settled else "-"
    line = f"accepting={accepting} settled={settled} next_slot={when(pacing.next_slot_at)}"
    if pacing.paused_until:
        line += f" paused until {when(pacing.paused_until)} (daily quota)"
    return line


@dataclass(frozen=True, slots=True)
class ProviderLine:
    """One configured provider as every view shows it: what it is, what it serves, what it
    takes, whether it is paused and why. ``checks``: the senders' latest preflight of it
    (shared.preflight.store; None: no sender has run one yet, and the views say so)."""

    name: str
    kind: str
    partitions: list[int]  # the partitions it serves (the control record's assignment)
    status: ProviderStatus
    pacing: Pacing
    ambiguous: int  # ambiguous attempts in its partitions, waiting to be settled
    checks: Checked | None = None

    def view(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "kind": self.kind,
            "partitions": self.partitions,
            **{k: v for k, v in self.status.view().items() if k != "provider"},
            **self.pacing.view(),
            "ambiguous": self.ambiguous,
            "checks": None if self.checks is None else [c.view() for c in self.checks.checks],
        }


async def provider_lines(
    client: RedisClient,
    kinds: dict[str, str],
    state: control.ControlState,
    partitions: list[dict[str, Any]],
) -> list[ProviderLine]:
    """One line per configured provider (``kinds``: name -> kind, the first is the default)
    and no other; ``partitions``: :func:`partitions_status`'s rows."""
    default = next(iter(kinds), "")
    checked = await read_checks(client)
    lines = []
    for name, kind in kinds.items():
        owned = [r for r in partitions if state.provider_for(r["partition"], default) == name]
        lines.append(
            ProviderLine(
                name,
                kind,
                [r["partition"] for r in owned],
                await provider_status(client, name, state),
                await pacing_status(client, name, state),
                sum(int(r["ambiguous"]) for r in owned),
                checked.get(name),
            )
        )
    return lines


# -- recently finished: the bounded per-partition indexes the ending scripts write ----------
RECENT_INDEXES: dict[str, Callable[[PartitionKeys], str]] = {
    "failed": lambda pk: pk.finished,  # failed or exhausted (model.RECENTLY_FAILED)
    "bounced": lambda pk: pk.bounced,
}
WINDOWS_MS = {"hour": 3_600_000, "day": RECENT_KEEP_MS}


async def recent_counts(client: RedisClient, partitions: int, now: int) -> dict[str, Any]:
    """How many operations failed or were exhausted, and how many bounced, in the last hour
    and day; ``capped``: a partition's index is full (RECENT_MAX), so a count may be low."""
    pipe = client.pipeline(transaction=False)
    for p in range(partitions):
        for index in RECENT_INDEXES.values():
            pipe.zcard(index(PartitionKeys(p)))
            for span in WINDOWS_MS.values():
                pipe.zcount(index(PartitionKeys(p)), now - span, "+inf")
    replies = iter(await pipe.execute())
    counts: dict[str, Any] = {name: dict.fromkeys(WINDOWS_MS, 0) for name in RECENT_INDEXES}
    capped = False
    for _ in range(partitions):
        for name in RECENT_INDEXES:
            capped |= int(next(replies)) >= RECENT_MAX
            for window in WINDOWS_MS:
                counts[name][window] += int(next(replies))
    return {**counts, "capped": capped}


async def recent(
    client: RedisClient,
    partitions: int,
    name: str,
    now: int,
    *,
    offset: int = 0,
    limit: int = 20,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the operations in index ``name`` (RECENT_INDEXES) over the last day,
    newest first, with their state and reason; and how many there are in all."""
    since = now - RECENT_KEEP_MS
    pipe = client.pipeline(transaction=False)
    for p in range(partitions):
        key = RECENT_INDEXES[name](PartitionKeys(p))
        pipe.zrevrangebyscore(key, "+inf", since, start=0, num=offset + limit, withscores=True)
        pipe.zcount(key, since, "+inf")
    replies = await pipe.execute()
    total = sum(int(n) for n in replies[1::2])
    entries = [(int(score), str(member)) for page in replies[0::2] for member, score in page]
    merged = sorted(entries, reverse=True)[offset : offset + limit]
    pipe = client.pipeline(transaction=False)
    for _, op in merged:
        pipe.hmget(PartitionKeys.of(op).operation(op), "state", "reason", "delivery")
    fields = await pipe.execute() if merged else []
    rows = [
        {
            "operation_id": op,
            "partition": PartitionKeys.of(op).partition,
            "at": at,
            "state": f[0] or "gone",
            "reason": f[1] or "",
            "delivery": f[2] or "",
        }
        for (at, op), f in zip(merged, fields, strict=True)
    ]
    return rows, total
