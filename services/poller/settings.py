"""Poller configuration (RESETGATE_*)."""

from __future__ import annotations

import base64
import ipaddress
from typing import Any, ClassVar

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key
from pydantic import Field, SecretStr, field_validator

from shared.clock import InMs
from shared.providers.registry import EVENT_CREDENTIAL
from shared.settings import (
    METRICS_PORTS,
    ConsumerSettings,
    PolicySettings,
    ProviderSettings,
    _Env,
    provider_prefix,
    read_under,
)


class InboundSettings(_Env):
    """What one source of pushed events is read with: a webhook's credential, an SES queue.
    As ``RESETGATE_<VARIABLE>``: the provider kind's own path (``/webhooks/sendgrid``); per
    configured name as ``RESETGATE_PROVIDER_<NAME>_<VARIABLE>`` (:func:`for_provider`), its
    own path ``/webhooks/<name>`` (services/poller/inbound/sources.py)."""

    sendgrid_webhook_public_key: str = ""  # the console's verification key (base64 DER)
    mailgun_webhook_signing_key: SecretStr = SecretStr("")
    postmark_webhook_username: SecretStr = SecretStr("")
    postmark_webhook_password: SecretStr = SecretStr("")
    postmark_webhook_networks: str = ""  # CIDRs, comma-separated; empty: any source
    # Amazon SES: the SQS queue subscribed to the configuration set's SNS topic.
    ses_queue_url: str = ""
    ses_dead_letter_queue_url: str = ""  # unparseable messages go here (else to the redrive)

    @field_validator("sendgrid_webhook_public_key")
    @classmethod
    def _sendgrid_key_loads(cls, value: str) -> str:
        if value:
            try:
                sendgrid_public_key(value)
            except ValueError as error:
                raise ValueError(f"not a base64 DER public key ({error})") from None
        return value

    @field_validator("postmark_webhook_networks")
    @classmethod
    def _networks_parse(cls, value: str) -> str:
        postmark_networks(value)  # ValueError names the bad entry
        return value

    def credentials(self) -> dict[str, str]:
        """kind -> the variable (without prefix) that configures it, for each kind set."""
        return {
            kind: variable
            for kind, variable in CREDENTIAL.items()
            if _set(getattr(self, variable.lower()))
        }

    def fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in InboundSettings.model_fields}


# The variable that turns each kind's source on (the others refine it): each kind's
# registry entry names it, a field of InboundSettings.
CREDENTIAL = EVENT_CREDENTIAL


def _set(value: str | SecretStr) -> bool:
    return bool(value.get_secret_value() if isinstance(value, SecretStr) else value)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def sendgrid_public_key(encoded: str) -> ec.EllipticCurvePublicKey:
    """The SendGrid console's verification key (base64 DER); PEM armour is tolerated."""
    body = "".join(line for line in encoded.strip().splitlines() if "-----" not in line)
    key = load_der_public_key(base64.b64decode(body, validate=True))
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValueError("the SendGrid verification key is not an elliptic-curve public key")
    return key


def postmark_networks(spec: str) -> list[Network]:
    """``"192.0.2.0/24, 2001:db8::/32"`` -> networks (a bare address is a /32 or /128)."""
    return [ipaddress.ip_network(part.strip()) for part in spec.split(",") if part.strip()]


def for_provider(name: str) -> InboundSettings:
    """``RESETGATE_PROVIDER_<NAME>_*``: the pushed-event settings of one configured name.
    Raises ValueError naming the variable that is wrong."""
    return read_under(InboundSettings, provider_prefix(name))


class PollerSettings(PolicySettings, ProviderSettings, ConsumerSettings, InboundSettings):
    metrics_port: int = Field(default=METRICS_PORTS["poller"], ge=0, le=65535)
    # The poller never derives a token (a replay reuses the operation; the sender derives
    # its token), so it neither needs nor checks RESETGATE_TOKEN_KEYS.
    token_keys: SecretStr = SecretStr("")
    # How stale the support view of delivery may get: the pause between feed polls once
    # the feed is drained (a full page is followed at once, within the budget). Lag is about
    # half of it on average and all of it at worst (docs/poller-router.md, "Choosing").
    poll_interval_seconds: float = Field(default=2.0, gt=0, le=3600)
    poll_batch: int = Field(default=1000, ge=1, le=1000)
    # Every provider call the poller makes (feed, lookups, message reads) spends this
    # budget; the provider counts its polling routes against one bucket too. 300 a minute
    # follows a burst of 5,000 events/s with 1,000-event pages.
    poll_max_requests_per_minute: int = Field(default=300, ge=1, le=60_000)
    poll_burst: int = Field(default=10, ge=1, le=1000)
    # A 429 without a usable Retry-After, or an unreachable provider: capped backoff.
    poll_backoff_cap_seconds: float = Field(default=60.0, gt=0)
    # How soon a new ambiguous attempt is asked about (a key's retention may be short).
    reconcile_interval_seconds: float = Field(default=1.0, gt=0)
    # The longest one operation whose lookup keeps failing is left alone (its wait doubles
    # per failure from the interval above).
    reconcile_backoff_cap_seconds: float = Field(default=300.0, gt=0)
    close_interval_seconds: float = Field(default=5.0, gt=0)
    # Events whose message no operation knows yet (the sender has not finalised, or the
    # attempt is still ambiguous) are retried for this long before they are dropped.
    orphan_hold_seconds: float = Field(default=120.0, ge=0)
    orphan_max: int = Field(default=10_000, ge=0)
    gc_interval_seconds: float = Field(default=60.0, gt=0)
    lease_seconds: float = Field(default=15.0, ge=1)
    # With work waiting on the provider and no events page or lookup succeeding for this
    # long, the lease holder says it is not ready (and PollerStalled pages).
    poll_stall_seconds: float = Field(default=600.0, ge=1)

    # Pushed events (docs/providers.md, "Delivery events"). The webhook listener has its own
    # port, never admission's; it starts when at least one provider's credential is set, and a
    # provider without one answers 404.
    webhook_port: int = Field(default=8085, ge=1, le=65535)
    webhook_max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024, le=32 * 1024 * 1024)
    # A signed timestamp further than this from our clock is refused (replay or broken clock).
    webhook_max_age_seconds: int = Field(default=300, ge=10, le=86_400)
    ses_wait_seconds: int = Field(default=20, ge=0, le=20)  # SQS long poll
    aws_region: str = "us-east-1"
    aws_endpoint_url: str = ""  # only for an emulator; credentials come from the AWS chain

    lease_ms: ClassVar[InMs] = InMs()

    @property
    def webhooks_enabled(self) -> bool:
        return bool(self.credentials())

    @field_validator("token_keys")
    @classmethod
    def _token_keys_parse(cls, value: SecretStr) -> SecretStr:
        return value  # overrides PolicySettings' check: see token_keys above
