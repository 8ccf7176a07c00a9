"""The senders publish the daily quota they keep to, which admission sizes the public
budget on (issue 34, item 4; services/admission/budget.py); without one, none is published,
so admission keeps no budget."""

from __future__ import annotations

import pytest

from services.sender.app import publish_quotas
from shared.quota import published
from tests.sender.conftest import Stack

pytestmark = pytest.mark.cluster_pass  # also on a Redis Cluster: make test-cluster


async def test_the_senders_publish_their_quota_and_withdraw_it_when_none(stack: Stack) -> None:
    settings = stack.settings(provider_daily_quota=20, quota_window_seconds=3600)
    async with stack.sender(provider_daily_quota=20, quota_window_seconds=3600) as sender:
        await publish_quotas(stack.redis, sender)
    quota = await published(stack.redis, settings.provider_name)
    assert quota is not None and (quota.limit, quota.window_ms) == (20, 3_600_000)
    async with stack.sender() as sender:
        await publish_quotas(stack.redis, sender)
    assert await published(stack.redis, settings.provider_name) is None
