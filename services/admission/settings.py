"""Admission settings: the recovery policy plus what only the HTTP gate and its support
console need (one module for the deployable: the console imports it, never the reverse)."""

from __future__ import annotations

import ipaddress
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from shared.clock import InMs
from shared.settings import (
    METRICS_PORTS,
    ArchiveSettings,
    DirectorySettings,
    PolicySettings,
    ProgressiveSettings,
    PublicLimitSettings,
    ReplicationSettings,
    _Env,
)

_HEADER = r"^[A-Za-z0-9-]{1,64}$"


def names(value: str) -> frozenset[str]:
    """A comma-separated list of group or user names as a set (blanks dropped)."""
    return frozenset(item.strip() for item in value.split(",") if item.strip())


class ConsoleSettings(_Env):
    """The support console (services/admission/console), served by admission."""

    # Unset: no console at all. Set: a second listener, separate from the public API, so the
    # console is only reachable where this port is (a sidecar proxy, an internal Service).
    console_port: int | None = Field(default=None, ge=0, le=65535)
    console_host: str = "127.0.0.1"
    # A signed-in session's lifetime; the cookie and the server-side record both end then.
    console_session_seconds: int = Field(default=900, ge=60, le=43_200)
    # A trace UI's page for one trace, with ``{trace_id}`` where the id goes (Jaeger:
    # ``https://jaeger.example/trace/{trace_id}``); unset, the console shows the id only.
    console_trace_url: str = Field(default="", pattern=r"^(https?://[^\s]*\{trace_id\}[^\s]*)?$")
    # Token sign-in attempts per client address: a burst at once, then one every
    # 60 / per-minute seconds (GCRA, shared/scripts/gcra.lua); a sign-in that succeeds
    # forgets the address's attempts, so the limit falls on guessing, not on signing in.
    console_sign_in_per_minute: int = Field(default=2, ge=1, le=600)
    # How long the operator audit trail keeps an action (the console trims it hourly; the
    # trail is also capped at shared.actions.AUDIT_MAXLEN entries).
    audit_retention_days: float = Field(default=90.0, gt=0, le=3650)
    console_sign_in_burst: int = Field(default=5, ge=1, le=100)
    # Secure cookies need HTTPS; only a plain-HTTP loopback setup turns this off.
    console_cookie_secure: bool = True
    # The role a sign-in with the internal API token gets.
    console_token_role: Literal["read", "act"] = "act"  # noqa: S105 - a role name, not a secret
    # Trusted auth proxy (oauth2-proxy style). Off unless the user header is named.
    console_proxy_user_header: str | None = Field(default=None, pattern=_HEADER)
    console_proxy_groups_header: str = Field(default="X-Forwarded-Groups", pattern=_HEADER)
    # The proxy's own addresses: the identity header counts only on a connection from one of
    # these (the hops in front of us we trust), so nobody else can claim to be signed in.
    # None by default: loopback is not a proxy (a port-forward or a sidecar is any local
    # client, which could then assert an identity or rotate X-Forwarded-For).
    console_trusted_proxies: str = Field(
        default="", description="CIDRs of the auth proxy's connections; none by default"
    )
    # Who may act (quarantine, release, pause, resume) and who may read, by proxy group or
    # user name. Empty read groups: every user the proxy vouches for may read.
    console_act_groups: str = ""
    console_act_users: str = ""
    console_read_groups: str = ""

    console_session_ms: ClassVar[InMs] = InMs()

    @field_validator("console_trusted_proxies")
    @classmethod
    def _networks(cls, value: str) -> str:
        for item in names(value):
            ipaddress.ip_network(item, strict=False)  # ValueError names the bad entry
        return value

    @model_validator(mode="after")
    def _proxy_needs_its_address(self) -> ConsoleSettings:
        if self.console_proxy_user_header and not names(self.console_trusted_proxies):
            raise ValueError(
                "RESETGATE_CONSOLE_PROXY_USER_HEADER needs RESETGATE_CONSOLE_TRUSTED_PROXIES: "
                "the CIDRs your auth proxy connects from (none is trusted by default)"
            )
        return self

    def trusted_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        return [ipaddress.ip_network(n, strict=False) for n in names(self.console_trusted_proxies)]


class AdmissionSettings(
    PolicySettings,
    DirectorySettings,
    ConsoleSettings,
    ReplicationSettings,
    PublicLimitSettings,
    ArchiveSettings,
    ProgressiveSettings,
):
    http_port: int = Field(default=8080, ge=0, le=65535)  # the API; nothing operational
    metrics_port: int = Field(default=METRICS_PORTS["admission"], ge=0, le=65535)
    # Required here: admission records the key id each operation's token is derived with.
    token_keys: SecretStr
    # Required: an internal API that silently accepted an empty token would be open.
    internal_api_token: SecretStr
    # Proxies in front of us that append to X-Forwarded-For; 0 = trust only the TCP peer.
    trusted_proxy_hops: int = Field(default=0, ge=0, le=10)
    max_body_bytes: int = Field(default=16384, ge=256, le=1_048_576)
    # The public answer is held until this long after the request was let through the IP
    # limit: above the work itself, every kind of login (unknown, new, converged, cooldown)
    # answers at the same time. 0 turns it off (benchmarks measuring CPU capacity).
    public_response_floor_ms: int = Field(default=25, ge=0, le=5000)
    # The share of the provider's daily quota the public endpoint may never spend: kept for
    # support agents and contact forms (services/admission/budget.py). Only where the senders
    # keep to a quota (SES's Max24HourSend or RESETGATE_PROVIDER_DAILY_QUOTA).
    public_budget_reserved_share: float = Field(default=0.2, ge=0, le=0.9)
    # A body must arrive within this long once the headers have: a client that drips it
    # byte by byte would otherwise hold a handler (and a connection) open indefinitely.
    body_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # Serve a minimal reset page at /reset-password that consumes the token (local runs:
    # `resetgate up` turns it on). Off by default: in production the game owns that page.
    local_reset_page: bool = False

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
