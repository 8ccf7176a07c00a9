"""The load driver: admits operations through every entry point, as real clients would, and
writes down exactly what it was told was accepted.

Each operation uses a fresh account and one channel: the admission process's public endpoint
(202 = received), its internal API (200/201 with an operation id), a contact form XADDed to
``rg:contact-forms`` for the router (the XADD reply is the acknowledgement), or
``shared.admit.Admitter`` directly (volume). Some accounts get a follow-up (a resend
click or a contact form) that must converge on the same operation. A failed call (a killed
process, Redis down, a 503) is retried with backoff until acknowledged, like a client would;
an acknowledgement is only recorded once received.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

import aiohttp
from redis.exceptions import RedisError

from shared.admit import Admitter
from shared.keys import CONTACT_FORMS
from shared.redis import TRANSIENT_ERRORS, RedisClient
from tests.chaos.stack import INTERNAL_TOKEN, Stack, account_id, login

RETRYABLE = (aiohttp.ClientError, TimeoutError, RedisError, *TRANSIENT_ERRORS)
CHANNEL_WEIGHTS = {"public": 0.15, "internal": 0.15, "form": 0.10, "direct": 0.60}
FOLLOW_UP_SHARE = 0.10


class Channel(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    FORM = "form"
    DIRECT = "direct"


class NotAcknowledged(Exception):
    """The call answered, but not with an acknowledgement (503, 5xx...): retry."""


@dataclass
class Acks:
    """What the driver was told was accepted, and when (monotonic seconds)."""

    operations: dict[str, tuple[Channel, float]] = field(default_factory=dict)
    operation_of_account: dict[str, str] = field(default_factory=dict)
    public: dict[str, float] = field(default_factory=dict)  # account id -> acked at
    forms: dict[str, tuple[str, float]] = field(default_factory=dict)  # event -> (account, at)
    follow_ups: int = 0
    retries: int = 0
    gave_up: int = 0

    @property
    def total(self) -> int:
        return len(self.operations) + len(self.public) + len(self.forms)


@dataclass
class Driver:
    stack: Stack
    admitter: Admitter
    client: RedisClient
    session: aiohttp.ClientSession
    rng: random.Random
    acks: Acks = field(default_factory=Acks)
    give_up_after: float = 120.0

    async def run(self, count: int, duration: float, concurrency: int = 48) -> None:
        """Start ``count`` admissions evenly over ``duration`` seconds; wait for all of them."""
        plan = [(i, self._channel(), self.rng.random() < FOLLOW_UP_SHARE) for i in range(count)]
        limit = asyncio.Semaphore(concurrency)
        started = time.monotonic()

        async def one(index: int, channel: Channel, follow_up: bool) -> None:
            async with limit:
                await self._acknowledged(lambda: self._admit(channel, index))
                if follow_up:
                    await self._acknowledged(lambda: self._follow_up(index))
                    self.acks.follow_ups += 1

        tasks = []
        for index, channel, follow_up in plan:
            delay = started + index * duration / count - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(index, channel, follow_up)))
        await asyncio.gather(*tasks)

    def _channel(self) -> Channel:
        names, weights = zip(*CHANNEL_WEIGHTS.items(), strict=True)
        return Channel(self.rng.choices(names, weights)[0])

    async def _acknowledged(self, call: Callable[[], Awaitable[None]]) -> None:
        deadline = time.monotonic() + self.give_up_after
        backoff = 0.1
        while True:
            try:
                return await call()
            except (NotAcknowledged, *RETRYABLE):
                if time.monotonic() > deadline:
                    self.acks.gave_up += 1
                    return None
                self.acks.retries += 1
                await asyncio.sleep(random.uniform(backoff / 2, backoff))
                backoff = min(backoff * 2, 2.0)

    # -- channels ------------------------------------------------------------------------
    async def _admit(self, channel: Channel, index: int) -> None:
        account = account_id(index)
        if channel is Channel.PUBLIC:
            await self._public(index)
        elif channel is Channel.FORM:
            await self._form(f"evt-{index}", index)
        elif channel is Channel.INTERNAL:
            self._record(channel, account, await self._internal(account))
        else:
            admission = await self.admitter.admit(account, "automation", "chaos-driver")
            self._record(channel, account, admission.operation_id)

    async def _follow_up(self, index: int) -> None:
        """A resend click or a contact form for an account that was just admitted."""
        if self.rng.random() < 0.5:
            await self._public(index)
        else:
            await self._form(f"evt-{index}-again", index)

    def _record(self, channel: Channel, account: str, operation_id: str) -> None:
        self.acks.operations[operation_id] = (channel, time.monotonic())
        self.acks.operation_of_account[account] = operation_id

    async def _public(self, index: int) -> None:
        url = self.stack.admission_url + "/v1/password-resets"
        async with self.session.post(url, json={"login": login(index)}) as response:
            await response.read()
            if response.status != 202:
                raise NotAcknowledged(response.status)
        self.acks.public[account_id(index)] = time.monotonic()

    async def _internal(self, account: str) -> str:
        url = self.stack.admission_url + "/internal/v1/recovery-operations"
        body = {"account_id": account, "entry_point": "agent", "actor": "chaos-driver"}
        headers = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
        async with self.session.post(url, json=body, headers=headers) as response:
            answer = await response.json(content_type=None)
            if response.status not in (200, 201) or not answer.get("operation_id"):
                raise NotAcknowledged(response.status)
        return str(answer["operation_id"])

    async def _form(self, event_id: str, index: int) -> None:
        fields = {
            "event_id": event_id,
            "topic": "password_reset",
            "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "account_id": account_id(index),
        }
        await self.client.xadd(CONTACT_FORMS, fields)  # type: ignore[arg-type]
        self.acks.forms[event_id] = (account_id(index), time.monotonic())
