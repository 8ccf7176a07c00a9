"""The webhook listener: ``POST /webhooks/<route>`` on the poller's own webhook port, one
route per source (a configured provider name, or a provider kind: inbound/sources.py).

Each source has a receiver, made by its kind's decoder module, that authenticates the
request (signature, token, basic auth) before anything is parsed or applied: a forged,
missing or stale credential is a 401 and touches nothing. A body over the limit is a 413,
one that is not the documented shape a 400; events the store cannot use (unknown type,
unknown operation, absurd date) are counted and dropped with a 200, so the provider does not
retry them forever. A store outage is a 503: the provider retries, and the dedupe makes the
retry harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from aiohttp import web

from services.poller.inbound.events import Receipt, Receive, Rejected
from services.poller.inbound.ingest import Ingest
from services.poller.inbound.sources import Source, sources, webhook_sources
from services.poller.settings import PollerSettings
from shared import metrics, service
from shared.logging import event
from shared.loops import ERRORS
from shared.providers.registry import entry
from shared.redis import RedisClient

log = logging.getLogger(__name__)
PREFIX = "/webhooks"
SERVICE = "poller-webhooks"
BODY_TIMEOUT_SECONDS = 10.0


Handler = Callable[[web.Request], Awaitable[web.Response]]


def receiver(source: Source, settings: PollerSettings, client: RedisClient) -> Receive:
    """The check of one source's credential (each configured name has its own), made by
    its kind's decoder module (the kind's registry entry names it)."""
    decoder = importlib.import_module(entry(source.kind).inbound_decoder)
    return cast(Receive, decoder.receiver(source, settings, client))


def receivers(
    settings: PollerSettings, client: RedisClient, found: Sequence[Source] | None = None
) -> dict[str, tuple[Source, Receive]]:
    """route -> (source, check), for the sources whose credentials are configured (by
    default the per-kind ones alone); any other route answers 404."""
    chosen = webhook_sources(sources(settings) if found is None else found)
    return {s.route: (s, receiver(s, settings, client)) for s in chosen}


class Webhooks:
    def __init__(
        self,
        settings: PollerSettings,
        client: RedisClient,
        ingest: Ingest,
        found: Sequence[Source] | None = None,
    ) -> None:
        self.settings = settings
        self.client = client
        self.ingest = ingest
        self.receivers = receivers(settings, client, found)
        self.listening = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=self.settings.webhook_max_body_bytes,
            middlewares=[service.instrument(SERVICE)],
        )
        for name, (source, receive) in self.receivers.items():
            app.router.add_post(f"{PREFIX}/{name}", self._handler(source, receive))
        app.router.add_route("*", "/{tail:.*}", self._elsewhere)
        return app

    async def _elsewhere(self, _: web.Request) -> web.Response:
        routes = ", ".join(f"POST {PREFIX}/{name}" for name in sorted(self.receivers))
        return service.json_error(404, "not_found", f"this port serves only {routes}")

    def _handler(self, source: Source, receive: Receive) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            response = await self._handle(source, receive, request)
            metrics.webhook_requests.labels(source.route, str(response.status)).inc()
            return response

        return handle

    async def _handle(self, source: Source, receive: Receive, request: web.Request) -> web.Response:
        name = source.route
        try:
            async with asyncio.timeout(BODY_TIMEOUT_SECONDS):  # a dripped body holds nothing long
                body = await request.read()
            receipt = await receive(request, body)
        except TimeoutError:
            return service.json_error(408, "body_timeout", "the body did not arrive in time")
        except web.HTTPRequestEntityTooLarge:
            limit = self.settings.webhook_max_body_bytes
            return service.json_error(413, "too_large", f"the body exceeds {limit} bytes")
        except Rejected as rejected:
            event(
                log,
                logging.WARNING,
                "webhook refused",
                provider=name,
                status=rejected.status,
                reason=rejected.message,
            )
            return service.json_error(rejected.status, rejected.error, rejected.message)
        except ERRORS as error:  # the replay guard could not reach the store
            return self._unavailable(name, error)
        try:
            result = await self.ingest.apply(name, receipt.parsed, source.providers)
        except ERRORS as error:
            await self._forget(receipt)
            return self._unavailable(name, error)
        return service.json_response(result.view())

    @staticmethod
    def _unavailable(name: str, error: BaseException) -> web.Response:
        event(
            log,
            logging.WARNING,
            "webhook not applied; the provider will retry",
            provider=name,
            error=type(error).__name__,
        )
        return service.json_error(503, "unavailable", "the store is unavailable; retry")

    async def _forget(self, receipt: Receipt) -> None:
        if receipt.replay_key:
            # Else it runs out with its TTL; until then a retry is refused as replayed.
            with contextlib.suppress(*ERRORS):
                await self.client.delete(receipt.replay_key)

    async def serve(self, stop: asyncio.Event) -> None:
        """A worker: listen on the webhook port until shutdown."""
        runner = web.AppRunner(
            self.app(), access_log=None, shutdown_timeout=5.0, **service.http_limits(self.settings)
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.settings.http_host, self.settings.webhook_port)
            await site.start()
            self.listening.set()
            event(
                log,
                logging.INFO,
                "webhook listener started",
                port=self.settings.webhook_port,
                providers=sorted(self.receivers),
            )
            await stop.wait()
        finally:
            await runner.cleanup()
