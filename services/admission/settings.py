"""Admission settings: the recovery policy plus what only the HTTP gate needs."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator, model_validator

from services.admission.console.settings import ConsoleSettings
from shared.settings import (
    METRICS_PORTS,
    DirectorySettings,
    PolicySettings,
    ReplicationSettings,
)


class AdmissionSettings(PolicySettings, DirectorySettings, ConsoleSettings, ReplicationSettings):
    http_port: int = Field(default=8080, ge=0, le=65535)  # the API; nothing operational
    metrics_port: int = Field(default=METRICS_PORTS["admission"], ge=0, le=65535)
    # Required here: admission records the key id each operation's token is derived with.
    token_keys: SecretStr
    # Required: an internal API that silently accepted an empty token would be open.
    internal_api_token: SecretStr
    # GCRA per client IP on the public endpoint; 0 turns the limit off.
    ip_limit_per_minute: int = Field(default=30, ge=0, le=1_000_000)
    ip_limit_burst: int = Field(default=10, ge=1, le=100_000)
    # Proxies in front of us that append to X-Forwarded-For; 0 = trust only the TCP peer.
    trusted_proxy_hops: int = Field(default=0, ge=0, le=10)
    max_body_bytes: int = Field(default=16384, ge=256, le=1_048_576)
    # The public answer is held until this long after the request was let through the IP
    # limit: above the work itself, every kind of login (unknown, new, converged, cooldown)
    # answers at the same time. 0 turns it off (benchmarks measuring CPU capacity).
    public_response_floor_ms: int = Field(default=25, ge=0, le=5000)
    # A body must arrive within this long once the headers have: a client that drips it
    # byte by byte would otherwise hold a handler (and a connection) open indefinitely.
    body_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # Serve a minimal reset page at /reset-password that consumes the token (local runs:
    # `resetgate up` turns it on). Off by default: in production the game owns that page.
    local_reset_page: bool = False
    # The hot path's commands pipelined on one hiredis link (services/admission/fastredis.py).
    # It uses redis-py internals (pyproject.toml pins the tested range); false = plain
    # redis-py, the way out if an upgrade breaks it.
    fast_redis: bool = True

    @model_validator(mode="after")
    def _ports_apart(self) -> AdmissionSettings:
        if self.metrics_port == self.http_port != 0:
            raise ValueError(
                "RESETGATE_METRICS_PORT must differ from RESETGATE_HTTP_PORT: the operational "
                "routes (/metrics tells admission results) must not share the API's port"
            )
        return self

    @field_validator("internal_api_token")
    @classmethod
    def _token_long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters")
        return value
