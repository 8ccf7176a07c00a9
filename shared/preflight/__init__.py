"""The preflight: what a first send through each configured provider would hit, asked
through the providers' documented read-only endpoints only (never a send).

``resetgate providers check`` prints it; the sender runs it at start and every
``RESETGATE_PROVIDER_CHECK_INTERVAL_SECONDS`` and publishes it (``shared.preflight.store``).
A check the key's scope cannot answer, or a provider that does not answer, is "unknown",
never "failed": only a documented answer fails a check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.from_address import FromAddress
from shared.providers.base import Http, Provider
from shared.providers.kind import ProviderConfig


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"
    UNKNOWN = "unknown"


# resetgate_provider_check's value per status (docs/runbook.md, ProviderMisconfigured).
GAUGE = {Status.OK: 1.0, Status.UNKNOWN: 0.0, Status.FAILED: -1.0}


@dataclass(frozen=True, slots=True)
class Check:
    provider: str
    check: str  # key, from, domain, delivery, account, production, identity, events ...
    status: Status
    detail: str  # what the provider said and, unless it passed, what to do

    def view(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "check": self.check,
            "status": str(self.status),
            "detail": self.detail,
        }

    @classmethod
    def of(cls, row: dict[str, Any]) -> Check:
        return cls(
            str(row["provider"]), str(row["check"]), Status(row["status"]), str(row["detail"])
        )

    def line(self) -> str:
        return f"{self.provider:<12} {self.check:<18} {self.status:<8} {self.detail}"


@dataclass(frozen=True, slots=True)
class Target:
    """One configured provider as its kind's checks see it (``Kind.preflight``)."""

    config: ProviderConfig
    provider: Provider  # its adapter, open
    http: Http  # its HTTP side (config.http), for the kinds whose API is HTTP
    froms: Sequence[FromAddress]  # the configured Froms that parse


def failing(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status is Status.FAILED]
