"""What the tests need to know per key-based provider kind: how to build its adapter and
what its documented answers look like (the sources are named in each adapter's module)."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from shared.providers.base import Provider
from shared.providers.kind import ProviderConfig
from shared.providers.registry import build, entry

KINDS = ("sendgrid", "postmark", "mailgun")
DOMAIN = "mg.game.example"
JSON = {"Content-Type": "application/json"}


def config(kind: str, url: str, key: str = "sandbox-key", **overrides: Any) -> ProviderConfig:
    """Provider ``kind``'s configuration; ``overrides`` may name its own settings too (its
    entry's class, ``mailgun_domain``), as its variables do, and the other kinds' are left out."""
    own = entry(kind).settings
    mine = {"mailgun_domain": DOMAIN, "mailgun_events_delay_seconds": 0.0, **overrides}
    values: dict[str, Any] = {
        "name": kind,
        "kind": kind,
        "url": url,
        "api_key": key,
        "connect_timeout": 1.0,
        "total_timeout": 2.0,
        "key_retention_seconds": 0,
        "settle_seconds": 0.0,
    }
    values.update({k: v for k, v in overrides.items() if k not in own.model_fields})
    values["kind_settings"] = own(**{k: v for k, v in mine.items() if k in own.model_fields})
    return ProviderConfig(**values)


def adapter(kind: str, session: aiohttp.ClientSession, url: str, **overrides: Any) -> Provider:
    return build(config(kind, url, **overrides), session)


def success(kind: str, message_id: str = "m-1") -> tuple[int, dict[str, str], bytes]:
    """The provider's documented accepted answer."""
    if kind == "sendgrid":
        return 202, {"X-Message-Id": message_id}, b""
    if kind == "postmark":
        body = {
            "To": "p@example.com",
            "SubmittedAt": "2026-11-30T10:00:00-05:00",
            "MessageID": message_id,
            "ErrorCode": 0,
            "Message": "OK",
        }
        return 200, JSON, orjson.dumps(body)
    return 200, JSON, orjson.dumps({"id": f"<{message_id}>", "message": "Queued. Thank you."})


def refused(kind: str, status: int) -> tuple[int, dict[str, str], bytes]:
    """The provider's own documented error body: SendGrid's
    ``{"errors": [{"message"}]}``, Postmark's ``{"ErrorCode", "Message"}``, Mailgun's
    ``{"message"}``."""
    if kind == "sendgrid":
        return status, JSON, orjson.dumps({"errors": [{"field": None, "message": "x"}]})
    if kind == "postmark":
        return status, JSON, orjson.dumps({"ErrorCode": 0, "Message": "x"})
    return status, JSON, orjson.dumps({"message": "x"})
