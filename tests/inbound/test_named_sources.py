"""Pushed events per configured provider name: two SendGrid accounts (a primary and a
standby) each have their own webhook path and signing key, and an event is joined only to
an operation the provider that sent it holds. The per-kind path of a one-provider
deployment keeps working.

Signed as SendGrid signs its Event Webhook (ECDSA P-256 over timestamp + body:
twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from services.poller.inbound.ingest import Ingest
from services.poller.inbound.sources import sources
from services.poller.inbound.webhooks import Webhooks
from services.poller.settings import PollerSettings
from shared import codec
from shared.keys import PartitionKeys
from shared.model import Delivery
from shared.operations import load_operation
from shared.providers.kind import ProviderConfig
from shared.providers.named import ProviderConfigError, load_providers
from tests.inbound.providers import SendGridSigner, sendgrid_event
from tests.inbound.test_ingest import operation

SIGNERS = {"primary": SendGridSigner.generate(), "standby": SendGridSigner.generate()}


def named_env(**extra: str) -> dict[str, str]:
    env = {"RESETGATE_PROVIDERS": "primary,standby"}
    for name in SIGNERS:
        infix = f"RESETGATE_PROVIDER_{name.upper()}"
        env |= {
            f"{infix}_KIND": "sendgrid",
            f"{infix}_URL": "https://api.sendgrid.com",
            f"{infix}_API_KEY": f"key-{name}",
        }
    return env | extra


@pytest.fixture
def two_accounts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ProviderConfig]]:
    env = named_env(
        **{
            f"RESETGATE_PROVIDER_{n.upper()}_SENDGRID_WEBHOOK_PUBLIC_KEY": s.public_key
            for n, s in SIGNERS.items()
        }
    )
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    yield load_providers(PollerSettings(partitions=4))


@asynccontextmanager
async def listener(
    redis: Redis, settings: PollerSettings, configured: list[ProviderConfig]
) -> AsyncIterator[TestServer]:
    webhooks = Webhooks(settings, redis, Ingest(redis, settings), sources(settings, configured))
    server = TestServer(webhooks.app())
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def post(
    server: TestServer, route: str, signer: SendGridSigner, op: str
) -> aiohttp.ClientResponse:
    body = codec.dumps([sendgrid_event(op, f"msg-{op}", "delivered", time.time() - 1)])
    async with aiohttp.ClientSession() as session:
        url = server.make_url(f"/webhooks/{route}")
        async with session.post(url, data=body, headers=signer.headers(body)) as answer:
            await answer.read()
            return answer


async def held_by(redis: Redis, name: str, state: str = "accepted") -> str:
    op = await operation(redis, state=state)
    await redis.hset(PartitionKeys.of(op).operation(op), "provider", name)
    return op


def poller_settings() -> PollerSettings:
    return PollerSettings(partitions=4, provider_api_key="k")


async def test_each_account_has_its_own_path_and_key(
    redis: Redis, two_accounts: list[ProviderConfig]
) -> None:
    settings = poller_settings()
    routes = {s.route: s.providers for s in sources(settings, two_accounts)}
    assert routes == {"primary": {"primary"}, "standby": {"standby"}}
    op = await held_by(redis, "standby")
    async with listener(redis, settings, two_accounts) as server:
        # Signed by primary's key, posted to standby's path: not standby's signature.
        assert (await post(server, "standby", SIGNERS["primary"], op)).status == 401
        assert (await post(server, "sendgrid", SIGNERS["standby"], op)).status == 404
        assert (await post(server, "standby", SIGNERS["standby"], op)).status == 200
    operation_now = await load_operation(redis, op)
    assert operation_now is not None and operation_now.delivery is Delivery.DELIVERED


async def test_an_event_is_joined_only_to_an_operation_its_provider_holds(
    redis: Redis, two_accounts: list[ProviderConfig]
) -> None:
    settings = poller_settings()
    at_standby = await held_by(redis, "standby")
    ambiguous_at_standby = await held_by(redis, "standby", state="ambiguous")
    async with listener(redis, settings, two_accounts) as server:
        for op in (at_standby, ambiguous_at_standby):
            answer = await post(server, "primary", SIGNERS["primary"], op)
            assert answer.status == 200
    delivered = await load_operation(redis, at_standby)
    assert delivered is not None and delivered.delivery is Delivery.UNKNOWN
    # Primary's event proves nothing about standby's attempt: it stays ambiguous.
    ambiguous = await load_operation(redis, ambiguous_at_standby)
    assert ambiguous is not None and ambiguous.state == "ambiguous"


async def test_the_per_kind_path_of_a_single_provider_keeps_working(redis: Redis) -> None:
    signer = SendGridSigner.generate()
    settings = PollerSettings(
        partitions=4,
        provider_kind="sendgrid",
        provider_url="https://api.sendgrid.com",
        provider_api_key="k",
        provider_name="mail",
        sendgrid_webhook_public_key=signer.public_key,
    )
    configured = load_providers(settings)
    # Its one provider's events, whatever name an operation was attempted under (one renamed
    # by RESETGATE_PROVIDER_NAME since, say): there is no other provider to confuse it with.
    assert [(s.route, s.providers) for s in sources(settings, configured)] == [("sendgrid", None)]
    op = await held_by(redis, "http")
    async with listener(redis, settings, configured) as server:
        assert (await post(server, "sendgrid", signer, op)).status == 200
    delivered = await load_operation(redis, op)
    assert delivered is not None and delivered.delivery is Delivery.DELIVERED


def test_a_credential_for_another_kind_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    env = named_env(RESETGATE_PROVIDER_STANDBY_MAILGUN_WEBHOOK_SIGNING_KEY="k" * 32)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    configured = load_providers(PollerSettings(partitions=4))
    with pytest.raises(ProviderConfigError, match="RESETGATE_PROVIDER_STANDBY_MAILGUN_WEBHOOK"):
        sources(PollerSettings(partitions=4), configured)


def test_a_bad_per_name_key_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    env = named_env(RESETGATE_PROVIDER_PRIMARY_SENDGRID_WEBHOOK_PUBLIC_KEY="not-a-key")
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    configured = load_providers(PollerSettings(partitions=4))
    with pytest.raises(ProviderConfigError, match="RESETGATE_PROVIDER_PRIMARY_SENDGRID_WEBHOOK"):
        sources(PollerSettings(partitions=4), configured)
