"""Where the sender's latest preflight results live (``keys.PROVIDER_CHECKS``) and the one
function that reads them: ``resetgate ops status`` and the console call :func:`read`."""

from __future__ import annotations

from dataclasses import dataclass

from shared import codec, metrics
from shared.keys import PROVIDER_CHECKS
from shared.preflight import GAUGE, Check, Status
from shared.redis import RedisClient


@dataclass(frozen=True, slots=True)
class Checked:
    """One provider's latest preflight, as a sender ran it."""

    provider: str
    checked_at: int  # ms
    checks: tuple[Check, ...]

    @property
    def failing(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAILED)


async def save(client: RedisClient, provider: str, checks: list[Check], now_ms: int) -> None:
    record = {"checked_at": now_ms, "checks": [c.view() for c in checks]}
    await client.hset(PROVIDER_CHECKS, provider, codec.dumps(record))


def publish(checks: list[Check]) -> None:
    """``resetgate_provider_check{provider,check}``: a check that runs per From domain is
    exported as its worst answer."""
    worst: dict[tuple[str, str], float] = {}
    for c in checks:
        label = (c.provider, c.check)
        worst[label] = min(worst.get(label, 1.0), GAUGE[c.status])
    for (provider, check), value in worst.items():
        metrics.provider_check.labels(provider, check).set(value)


async def read(client: RedisClient) -> dict[str, Checked]:
    """Every provider's latest preflight, by name; a record that does not read is left out."""
    raw = await client.hgetall(PROVIDER_CHECKS)
    found = {}
    for name, value in raw.items():
        provider = name.decode() if isinstance(name, bytes) else str(name)
        try:
            record = codec.loads(value)
            checks = tuple(Check.of(row) for row in record["checks"])
            found[provider] = Checked(provider, int(record["checked_at"]), checks)
        except (codec.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return found
