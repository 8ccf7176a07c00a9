"""Wiring: settings -> Redis, the archive's pool -> the archiver's loops."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.archiver.settings import ArchiverSettings
from services.archiver.worker import Archiver
from shared import service
from shared.archive import open_pool
from shared.loops import named_loop
from shared.redis import RedisClient, until_done

SERVICE = "archiver"


@asynccontextmanager
async def wire(settings: ArchiverSettings, client: RedisClient) -> AsyncIterator[service.Wiring]:
    async with open_pool(settings) as pool:
        archiver = Archiver(settings, client, pool)
        await until_done(archiver.ensure_groups, "archive groups")
        workers = [
            named_loop(SERVICE, "archive", archiver.archive_step),
            named_loop(SERVICE, "claim", archiver.claim_step),
            named_loop(SERVICE, "lag", archiver.lag_step),
            named_loop(SERVICE, "prune", archiver.prune_step),
        ]
        yield service.Wiring(workers, service.redis_readiness(SERVICE, client))


def check(settings: ArchiverSettings) -> None:
    """The archiver has nothing to do without an archive: one line and exit 2, like a bad
    setting, rather than a service that looks up and archives nothing."""
    if not settings.archive_configured:
        print(
            "RESETGATE_ARCHIVE_DSN is not set: the archiver needs the archive's libpq URL "
            "(postgresql://user:pass@host:5432/db)",
            file=sys.stderr,
        )
        raise SystemExit(2)


def main() -> None:
    service.main(SERVICE, ArchiverSettings, wire, check)


if __name__ == "__main__":
    main()
