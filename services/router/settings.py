"""Router configuration (RESETGATE_*)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from shared.clock import InMs
from shared.settings import METRICS_PORTS, ConsumerSettings, DirectorySettings, PolicySettings

DEFAULT_ACCOUNT_TOPICS = "account_access,password_reset,login_problem,hacked_account"


class RouterSettings(PolicySettings, DirectorySettings, ConsumerSettings):
    metrics_port: int = Field(default=METRICS_PORTS["router"], ge=0, le=65535)
    # Required: admission records the key id each new operation's token is derived with.
    token_keys: SecretStr
    # Comma-separated contact-form topics that are about getting into an account.
    account_topics: str = DEFAULT_ACCOUNT_TOPICS
    read_batch: int = Field(default=16, ge=1, le=1000)
    block_ms: int = Field(default=1000, ge=10, le=60_000)
    # An entry left pending this long (its router died or hit a directory outage) is
    # taken over; also how old a routing claim must be before another router may redo it.
    claim_idle_seconds: float = Field(default=30.0, ge=1)
    # How long an event id is remembered: redeliveries later than this would make a case.
    seen_ttl_seconds: int = Field(default=14 * 24 * 3600, ge=60)
    # How long a form the directory could not route yet keeps its routed fields (the login, an
    # address): past that it is dead-lettered "expired" with none of them. A day outlasts any
    # directory outage the router should ride out; a longer one is an incident, and the form
    # system still holds the form itself.
    form_retention_seconds: int = Field(
        default=24 * 3600,
        ge=1,
        description="seconds a form waiting on the directory keeps its login before it is "
        "dead-lettered 'expired'",
    )
    support_cases_maxlen: int = Field(default=1_000_000, ge=1000)
    dead_letter_maxlen: int = Field(default=100_000, ge=100)

    @field_validator("account_topics")
    @classmethod
    def _topics_listed(cls, value: str) -> str:
        if not [t for t in value.split(",") if t.strip()]:
            raise ValueError("must list at least one topic")
        return value

    claim_idle_ms: ClassVar[InMs] = InMs()
    seen_ttl_ms: ClassVar[InMs] = InMs()
    form_retention_ms: ClassVar[InMs] = InMs()

    @property
    def account_topic_set(self) -> frozenset[str]:
        return frozenset(t.strip().lower() for t in self.account_topics.split(",") if t.strip())
