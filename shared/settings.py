"""Configuration: one pydantic-settings class per service on a shared base.

Every variable carries the ``RESETGATE_`` prefix. A service builds its settings once in
``main()`` through :func:`load`, which turns a validation error into one line naming the
variable and exits, instead of a pydantic traceback at 3 a.m.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Literal, TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "RESETGATE_"
# The operational listener's default port per service (``resetgate up`` keeps these when it
# runs admission's API on 8080).
METRICS_PORTS = {"admission": 8081, "sender": 8082, "poller": 8083, "router": 8084}
# The name the single-provider settings (RESETGATE_PROVIDER_KIND, _URL, _API_KEY) give their
# one provider: in metrics, pacing state, the credentials pause and the control record.
DEFAULT_PROVIDER = "default"


class _Env(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")


# One mixin per concern: a service's settings class lists the concerns it has, and each
# variable is declared (default, bounds, check) in exactly one of them.


class RedisSettings(_Env):
    """The operation store and its partitioning (every service, ``resetgate``)."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_cluster: bool = False
    redis_timeout_seconds: float = Field(default=5.0, gt=0)
    redis_max_connections: int = Field(default=64, ge=2, le=10000)
    partitions: int = Field(default=16, ge=1, le=1024)


class ListenerSettings(_Env):
    """The process: its operational listener, logging and graceful shutdown."""

    http_host: str = "0.0.0.0"
    # /healthz, /readyz and /metrics, never on a public port. Each service has its own default
    # (METRICS_PORTS), so the four can run side by side on one machine unconfigured.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # How long a connection may go without a complete request, idle or dribbling its headers
    # (aiohttp has no separate header timeout; its default is an hour). Keep it above the idle
    # timeout of the proxy in front (ingress-nginx and AWS ALB: 60 s), or that proxy may reuse
    # a connection this side has just closed.
    http_keepalive_seconds: float = Field(default=75.0, gt=0, le=3600)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    shutdown_grace_seconds: float = Field(default=20.0, gt=0)


class CommonSettings(RedisSettings, ListenerSettings):
    """What every service needs: the store, the process, and the default provider's name
    (its pacing state and the partitions it serves are read by every service)."""

    provider_name: str = Field(default=DEFAULT_PROVIDER, pattern=r"^[a-z0-9_-]{1,32}$")


class DirectorySettings(_Env):
    """The account directory: the studio's over HTTP when set, else the Redis stand-in."""

    directory_url: str = ""
    directory_timeout_seconds: float = Field(default=2.0, gt=0, le=30)

    @field_validator("directory_url")
    @classmethod
    def _directory_url_http(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


class ConsumerSettings(_Env):
    """A reader of a Redis Streams consumer group (or a lease holder): its name in the group."""

    consumer_name: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")


class PolicySettings(CommonSettings):
    """Recovery policy shared by the services that create or move operations."""

    token_keys: SecretStr = SecretStr("")
    cooldown_seconds: int = Field(default=300, ge=0)
    token_ttl_seconds: int = Field(default=3600, ge=60)
    max_attempts: int = Field(default=6, ge=1, le=100)
    horizon_margin_seconds: int = Field(default=120, ge=0)
    ambiguous_policy: Literal["replay", "review"] = "replay"
    observation_window_seconds: int = Field(default=7200, ge=1)
    retention_seconds: int = Field(default=30 * 24 * 3600, ge=3600)

    @model_validator(mode="after")
    def _margin_fits(self) -> PolicySettings:
        if self.horizon_margin_seconds >= self.token_ttl_seconds:
            raise ValueError(
                "RESETGATE_HORIZON_MARGIN_SECONDS must be below RESETGATE_TOKEN_TTL_SECONDS, "
                "or every operation is exhausted before its first attempt"
            )
        return self

    @field_validator("token_keys")
    @classmethod
    def _token_keys_parse(cls, value: SecretStr) -> SecretStr:
        from shared.tokens import parse_keys

        parse_keys(value.get_secret_value())
        return value


SANDBOX_URL = "http://127.0.0.1:8090"  # the local sandbox provider (`resetgate up`)
ProviderKind = Literal["http", "sendgrid", "postmark", "mailgun", "ses"]
KEY_KINDS = frozenset({"http", "sendgrid", "postmark", "mailgun"})


class ProviderSettings(CommonSettings):
    """The email provider the sender sends through and the poller reconciles with (the
    default one; ``RESETGATE_PROVIDERS`` names more, ``shared.providers.named``).
    ``shared.providers.factory.ProviderConfig`` is what an adapter is built from.
    """

    provider_kind: ProviderKind = "http"
    # Base URL; for SES the endpoint override (empty: the region's endpoint).
    provider_url: str = SANDBOX_URL
    provider_api_key: SecretStr = SecretStr("")
    mailgun_domain: str = Field(default="", pattern=r"^[A-Za-z0-9.-]{0,253}$")
    # Mailgun documents that its events become complete only after a delay ("half an
    # hour"): a lookup about a younger send can miss it.
    mailgun_events_delay_seconds: float = Field(default=1800.0, ge=0)
    connect_timeout_seconds: float = Field(default=3.0, gt=0)
    total_timeout_seconds: float = Field(default=15.0, gt=0)
    # A provider without a native key may still be processing a request the sender timed
    # out on: its lookup is believed only about sends at least this old.
    reconcile_grace_seconds: float = Field(default=20.0, ge=0)
    # How long the provider keeps a native idempotency key (the http adapter's
    # Idempotency-Key). It may be small: an ambiguous attempt is replayed with the same key
    # only while the key is kept, and otherwise looked up or held (services/poller/ambiguity.py).
    idempotency_window_seconds: int = Field(default=86400, ge=1)
    # The longest wait a provider's Retry-After can impose on a loop (the poller's requests,
    # the sender's provider-wide block); beyond it we ask again. One absurd answer must not
    # silence a loop for days.
    max_advised_wait_seconds: float = Field(default=900.0, gt=0, le=86400)

    @model_validator(mode="after")
    def _provider_complete(self) -> ProviderSettings:
        missing = provider_setting_missing(self)
        if missing:
            raise ValueError(missing)
        return self


def provider_setting_missing(settings: ProviderSettings) -> str:
    """What the chosen provider kind lacks, as one line naming the variable ("" if none)."""
    if os.environ.get(f"{ENV_PREFIX}PROVIDERS", "").strip():
        return ""  # several named providers: shared.providers.named checks each one
    kind = settings.provider_kind
    if kind in KEY_KINDS and not settings.provider_api_key.get_secret_value():
        return f"{ENV_PREFIX}PROVIDER_API_KEY: required for {ENV_PREFIX}PROVIDER_KIND={kind}"
    if kind == "mailgun" and not settings.mailgun_domain:
        return f"{ENV_PREFIX}MAILGUN_DOMAIN: required for {ENV_PREFIX}PROVIDER_KIND=mailgun"
    if kind == "ses" and not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
        return f"AWS_REGION: required for {ENV_PREFIX}PROVIDER_KIND=ses (or AWS_DEFAULT_REGION)"
    return ""


S = TypeVar("S", bound=BaseSettings)


def describe_error(error: ValidationError, prefix: str = ENV_PREFIX) -> str:
    """One line naming the variable(s) and what is wrong, never echoing a secret value (nor
    pydantic's "For further information visit ..." line, which tells an operator nothing)."""
    parts = []
    for item in error.errors():
        loc = "_".join(str(p) for p in item["loc"]).upper()
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{prefix}{loc}: {message}" if loc else message)
    return "invalid configuration: " + "; ".join(parts)


def load(cls: type[S]) -> S:
    """Build settings from the environment or stop the process with one clear line."""
    try:
        return cls()
    except ValidationError as error:
        prefix = str(cls.model_config.get("env_prefix") or ENV_PREFIX)
        print(describe_error(error, prefix), file=sys.stderr)
        raise SystemExit(2) from None
