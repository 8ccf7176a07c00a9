"""Provider health: whether this process may send through one provider now, and what changes it.

One object per configured provider per sender process. The attempt and the workers ask it;
nothing else keeps a provider's pause, quota or refusals guard:

- ``paused``: a pause of any kind (shared.control.PauseKind: credentials, account, quota,
  refusals). Set here at once by an answer this process sees, so its other workers stop
  before the next control refresh; set from the control record on every refresh (another
  sender's pause, an operator's resume), where a quota pause past its window and a
  credentials pause of a key no longer deployed are lifted.
- the daily quota (shared.quota): a send is taken before the provider is called and given
  back when nothing can have reached the player.
- the refusals guard (services/sender/guard.py): told about every answer; its trip pauses
  the provider and holds the streak's operations for a person.
"""

from __future__ import annotations

import logging

from services.sender.guard import RefusalGuard, Refused, Trip, undocumented
from shared import clock, control, metrics
from shared.clock import to_seconds
from shared.logging import event
from shared.model import Outcome, State
from shared.providers.base import SendResult
from shared.quota import QUOTA_EXCEEDED, DailyQuota, refused_until
from shared.redis import RedisClient
from shared.scripts.attempts import Finalisation, HoldCode, HoldRefused

log = logging.getLogger(__name__)
# The note on an operation whose undocumented refusal helped trip the guard: held for review.
HELD_REFUSED = "held: tripped the refusals guard (provider paused); see docs/runbook.md"


class ProviderHealth:
    def __init__(
        self,
        client: RedisClient,
        name: str,
        api_key: str,
        guard: RefusalGuard,
        quota: DailyQuota | None = None,
    ) -> None:
        """``name``, ``api_key``: the configured provider (``shared.providers.named``); only
        the key's fingerprint is kept, to tell a rotated key from the rejected one."""
        self.client = client
        self.name = name
        self.fingerprint = control.key_fingerprint(api_key)
        self.guard = guard
        self.quota = quota
        self.paused = False

    # -- the control record ------------------------------------------------------------------
    async def refresh(self, state: control.ControlState) -> None:
        """Take this provider's pause from the control record (re-read every second)."""
        mine = state.auth_paused.get(self.name)
        kind = control.pause_kind(mine) if mine is not None else ""
        if mine and control.pause_over(mine, clock.now_ms()):
            # A quota's window rolled over: the pause lifts by itself.
            await self._lift("provider pause over; sending resumes", kind=kind)
            mine, kind = None, ""
        elif kind == control.PauseKind.CREDENTIALS and mine and mine.get("key") != self.fingerprint:
            # A different key has been deployed since the rejection: try again with it. (An
            # account or refusals pause is not about the key: only an operator lifts it.)
            await self._lift("new provider key deployed; auth pause lifted")
            mine, kind = None, ""
        self.paused = mine is not None
        metrics.provider_auth_paused.labels(self.name).set(
            int(kind == control.PauseKind.CREDENTIALS)
        )
        for each in control.PauseKind:
            metrics.provider_paused.labels(self.name, str(each)).set(int(kind == each))

    async def _lift(self, why: str, **fields: str) -> None:
        await control.auth_resume(self.client, self.name)
        event(log, logging.INFO, why, provider=self.name, **fields)

    # -- the daily quota ---------------------------------------------------------------------
    async def take_quota(self) -> int | None:
        """One send from the provider's daily quota: when it was taken (ms; 0 when there is
        no quota), or None when the quota is used up (the provider is paused until the
        window rolls over, and the job goes back to wait)."""
        if self.quota is None:
            return 0
        now = clock.now_ms()
        taken = await self.quota.take(self.client, now)
        if taken.taken:
            return now
        if not self.paused:  # workers that were already waiting for a slot: said once
            reason = (
                f"daily quota of {self.quota.limit} sends used up; sending resumes as "
                "the window rolls over"
            )
            await self._quota_pause(taken.reopens_at, reason)
        return None

    async def give_back(self, quota_at: int) -> None:
        """Nothing reached the player: the send taken from the quota at ``quota_at`` goes
        back (0: none was taken)."""
        if self.quota is not None and quota_at:
            await self.quota.give_back(self.client, quota_at)

    async def _quota_pause(self, until: int, reason: str) -> None:
        self.paused = True  # this replica stops now; the others within a second
        await control.quota_pause(self.client, self.name, until, reason, self.fingerprint)
        event(
            log,
            logging.WARNING,
            "provider quota used up; sending paused",
            provider=self.name,
            until=until,
        )

    # -- answers -----------------------------------------------------------------------------
    def judge(self, result: SendResult, final: Finalisation, refusal: Refused) -> Trip | None:
        """The refusals guard's say on one answer: the trip it completes, if any. Only an
        undocumented refusal counts (a recipient's never does). The verdict is taken here,
        with no await between the count and ``paused``: no concurrent attempt of this
        process can clear or repeat it."""
        if final.next_state is State.ACCEPTED:
            self.guard.accepted()
        if not undocumented(result) or self.paused:
            return None  # refused while paused: it waits; the trip already held its streak
        trip = self.guard.refused(refusal, final.reason)
        if trip is not None:
            self.paused = True  # this process stops now; the others within a second
        return trip

    async def answered(self, result: SendResult, trip: Trip | None) -> None:
        """Act on an answer once its attempt is finalised: count a throttle, pause on a
        refusal of our account or quota, and carry out the guard's ``trip``."""
        if result.outcome is Outcome.THROTTLED:
            metrics.provider_throttled.labels(self.name).inc()
            if result.reason == QUOTA_EXCEEDED:
                until = refused_until(self.quota, clock.now_ms())
                await self._quota_pause(until, "the provider says its daily quota is used up")
        elif result.outcome is Outcome.AUTH:
            await self._pause(result)
        if trip is not None:
            await self._trip(trip)

    async def _pause(self, result: SendResult) -> None:
        self.paused = True
        kind = control.PauseKind(result.pause)
        reason = result.detail or result.reason or f"HTTP {result.status}"
        if kind is control.PauseKind.CREDENTIALS:
            reason = f"credentials rejected (HTTP {result.status})" + (
                f": {result.detail}" if result.detail else ""
            )
        await control.provider_pause(
            self.client, self.name, kind, reason, status=result.status, fingerprint=self.fingerprint
        )
        event(
            log,
            logging.ERROR,
            "provider refused us; sending paused",
            provider=self.name,
            status=result.status,
            kind=str(kind),
            reason=control.sanitise(reason),
        )

    async def _trip(self, trip: Trip) -> None:
        """Pause the provider (unless another sender or kind paused it first) and hold the
        streak's operations for a person."""
        window = to_seconds(self.guard.window_ms)
        reason = (
            f"{len(trip.streak)} distinct operations, recipients and accounts refused "
            f"alike within {window:g} s by an answer no provider page documents: "
            f"{trip.reason}"
        )
        ids = [refused.operation_id for refused in trip.streak]
        wrote = await control.refusals_pause(self.client, self.name, reason, ids, self.fingerprint)
        held = 0
        if wrote:
            now = clock.now_ms()
            for operation_id in ids:
                code, _ = await HoldRefused(
                    operation_id=operation_id, now=now, reason=trip.reason, note=HELD_REFUSED
                ).run(self.client)
                held += code is HoldCode.OK
        event(
            log,
            logging.ERROR,
            "provider refuses operations alike; sending paused",
            provider=self.name,
            reason=trip.reason,
            operations=len(ids),
            held=held,
            paused_here=wrote,
        )
