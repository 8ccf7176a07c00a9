"""Kept so ``from shared.provider import …`` keeps working: the adapters live in
``shared.providers`` (the contract in ``base``, the ``http`` adapter in ``http``)."""

from shared.providers.base import (
    MAX_BODY,
    LookupResult,
    PollResult,
    Provider,
    ProviderUnavailable,
    SendResult,
    read_bounded,
)
from shared.providers.http import HttpProvider, classify_status

__all__ = [
    "MAX_BODY",
    "HttpProvider",
    "LookupResult",
    "PollResult",
    "Provider",
    "ProviderUnavailable",
    "SendResult",
    "classify_status",
    "read_bounded",
]
