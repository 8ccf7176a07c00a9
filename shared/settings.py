"""Configuration: one pydantic-settings class per service on a shared base.

Every variable carries the ``RESETGATE_`` prefix. A service builds its settings once in
``main()`` through :func:`load`, which turns a validation error into one line naming the
variable and exits, instead of a pydantic traceback at 3 a.m.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.clock import InMs

if TYPE_CHECKING:
    from shared.providers.kind import Kind

ENV_PREFIX = "RESETGATE_"
# The operational listener's default port per service (``resetgate up`` keeps these when it
# runs admission's API on 8080).
METRICS_PORTS = {
    "admission": 8081,
    "sender": 8082,
    "poller": 8083,
    "router": 8084,
    "archiver": 8086,
}
# The name the single-provider settings (RESETGATE_PROVIDER_KIND, _URL, _API_KEY) give their
# one provider: in metrics, pacing state, the credentials pause and the control record.
DEFAULT_PROVIDER = "default"
# Every provider name, the single one's and those in RESETGATE_PROVIDERS: a name is the infix
# of its own variables (RESETGATE_PROVIDER_<NAME>_KIND), where "-" cannot stand in a shell
# and "_" would let two names share a variable (name a_ses_queue's _URL is name a's _SES_QUEUE_URL).
PROVIDER_NAME = r"^[a-z0-9]{1,32}$"


class _Env(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")


# One mixin per concern: a service's settings class lists the concerns it has, and each
# variable is declared (default, bounds, check) in exactly one of them.


REDIS_SCHEMES = ("redis", "rediss", "unix")  # what redis-py's from_url accepts
REDIS_URL_FORM = "redis://[:PASSWORD@]HOST:PORT/DB (rediss:// for TLS, unix:///path.sock)"


class RedisSettings(_Env):
    """The operation store and its partitioning (every service, ``resetgate``)."""

    # With Sentinel, the URL still gives the data nodes' password, database and TLS
    # (``rediss://``, ``?ssl_ca_certs=``); its host and port are what Sentinel names instead.
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_cluster: bool = False
    redis_timeout_seconds: float = Field(default=5.0, gt=0)
    redis_max_connections: int = Field(default=64, ge=2, le=10000)
    # A span per Redis command when traces are on (shared/tracing.py): many, so only on
    # request; each names its command, never its arguments.
    trace_redis_commands: bool = False
    partitions: int = Field(default=16, ge=1, le=1024)
    redis_sentinels: str = Field(
        default="",
        description="host:port,... of the Sentinels; set, every connection goes to the primary "
        "they name (RESETGATE_REDIS_SENTINEL_MASTER) and follows a failover",
    )
    redis_sentinel_master: str = Field(
        default="mymaster",
        pattern=r"^[A-Za-z0-9._-]{1,64}$",
        description="the name the Sentinels monitor the primary under",
    )
    redis_sentinel_password: SecretStr = Field(
        default=SecretStr(""),
        description="the Sentinels' own password (requirepass); empty: the Redis URL's password",
    )
    redis_sentinel_tls: bool = Field(
        default=False,
        description="TLS to the Sentinels too (with the URL's ssl_* options, e.g. ssl_ca_certs)",
    )
    # Admission's and the sender's hot-path commands pipelined on one hiredis link
    # (shared/fastredis.py; standalone Redis only). It uses redis-py internals (pyproject.toml
    # pins the tested range); false = plain redis-py, the way out if an upgrade breaks it.
    fast_redis: bool = True

    @field_validator("redis_url")
    @classmethod
    def _url_form(cls, value: str) -> str:
        # redis-py's own refusal came as a traceback from the first connection; the value is
        # never echoed (it may hold a password).
        scheme, found, rest = value.partition("://")
        if not found or scheme not in REDIS_SCHEMES or not rest.strip("/"):
            raise ValueError(f"not a Redis URL: expected {REDIS_URL_FORM}")
        return value

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinels_parse(cls, value: str) -> str:
        sentinel_addresses(value)
        return value

    @field_validator("redis_url")
    @classmethod
    def _url_parses(cls, value: str) -> str:
        problem = redis_url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_topology(self) -> RedisSettings:
        if self.redis_sentinels and self.redis_cluster:
            raise ValueError(
                "RESETGATE_REDIS_SENTINELS and RESETGATE_REDIS_CLUSTER exclude each other: "
                "Sentinel fronts one primary, a Cluster fails over by itself"
            )
        return self


def redis_url_problem(url: str) -> str:
    """What stops a Redis URL's host part from parsing, in words that never quote the URL
    ("" when it parses). A password holding an unencoded "/", "?" or "#" ends the host part
    early: redis-py's own message then quotes the rest as the port, the password's head."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it is the check: a non-number raises)
    except ValueError:
        return (
            "its host part does not parse: a malformed host or port, or a password "
            "holding '/', '?' or '#' that is not percent-encoded"
        )
    return ""


def sentinel_addresses(value: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` as pairs; a malformed entry is a ValueError naming it."""
    addresses = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


class ReplicationSettings(_Env):
    """Redis ``WAIT``: how many replicas must hold a write before it counts (admission's
    acknowledgement, the sender's attempt before the provider call)."""

    wait_replicas: int = Field(
        default=0,
        ge=0,
        le=16,
        description="replicas that must confirm a write (WAIT) before it is acknowledged or "
        "an email is sent on it; 0 = do not wait",
    )
    wait_timeout_ms: int = Field(default=200, ge=1, le=60_000)


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

    provider_name: str = Field(default=DEFAULT_PROVIDER, pattern=PROVIDER_NAME)


class ProgressiveSettings(_Env):
    """The progressive provider switch (shared/progressive.py): how it widens and when it
    rolls back. A switch keeps the values of the process that asked for it (the CLI, the
    console or the sender whose failover policy started it)."""

    progressive_first: int = Field(
        default=1, ge=1, le=1024, description="partitions the first step moves"
    )
    progressive_growth: float = Field(
        default=2.0, ge=1.0, le=16.0, description="each step moves this many times the last"
    )
    progressive_window_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="how long each step is watched before the switch widens",
    )
    progressive_max_throttled_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="429s at the new provider, as a share of its answers in a step's window, "
        "that roll the switch back",
    )
    progressive_abort_age_seconds: float = Field(
        default=1800.0,
        ge=0,
        description="a moved partition's oldest eligible operation older than this rolls the "
        "switch back (0: off); about half the default delivery horizon",
    )
    progressive_settle_seconds: float = Field(
        default=300.0,
        gt=0,
        description="how long a step waits for its partitions' in-flight sends before it "
        "rolls back",
    )


class PublicLimitSettings(_Env):
    """The public endpoint's per-client-address limit (admission; `resetgate up` states it)."""

    # GCRA per client IP on the public endpoint; 0 turns the limit off.
    ip_limit_per_minute: int = Field(default=30, ge=0, le=1_000_000)
    ip_limit_burst: int = Field(default=10, ge=1, le=100_000)


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


class ArchiveSettings(_Env):
    """The PostgreSQL evidence archive (docs/archive.md): written by the archiver, read by
    whatever shows an operation Redis no longer holds. No DSN: no archive (Redis only)."""

    archive_dsn: SecretStr = Field(
        default=SecretStr(""),
        description="libpq URL of the archive (postgresql://user:pass@host:5432/db); "
        "empty: no archive, evidence lives in Redis for RESETGATE_RETENTION_SECONDS only",
    )
    archive_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    archive_pool_size: int = Field(default=4, ge=1, le=100)

    @property
    def archive_configured(self) -> bool:
        return bool(self.archive_dsn.get_secret_value())


class RetentionSettings(_Env):
    """How long a finished operation is kept: the services that finish one, and the operator
    tools that close one."""

    retention_seconds: int = Field(default=30 * 24 * 3600, ge=3600)

    retention_ms: ClassVar[InMs] = InMs()


class PolicySettings(CommonSettings, RetentionSettings):
    """Recovery policy shared by the services that create or move operations."""

    token_keys: SecretStr = SecretStr("")
    cooldown_seconds: int = Field(default=300, ge=0)
    token_ttl_seconds: int = Field(default=3600, ge=60)
    max_attempts: int = Field(default=6, ge=1, le=100)
    horizon_margin_seconds: int = Field(default=120, ge=0)
    ambiguous_policy: Literal["replay", "review"] = "replay"
    observation_window_seconds: int = Field(default=7200, ge=1)
    # On: a finished operation is kept, without an expiry, until the archiver has written it
    # to PostgreSQL (services/archiver), which then lets it expire after its tail. Off:
    # it expires RETENTION_SECONDS after it finished and no archive is kept.
    archive_enabled: bool = False

    # The store's unit: scripts and stored fields count milliseconds, settings seconds.
    cooldown_ms: ClassVar[InMs] = InMs()
    token_ttl_ms: ClassVar[InMs] = InMs()
    horizon_margin_ms: ClassVar[InMs] = InMs()
    observation_window_ms: ClassVar[InMs] = InMs()

    @property
    def settled_retention_ms(self) -> int:
        """What the scripts that finish an operation are sent as its retention: 0 (kept until
        archived, shared/scripts ``-- @settle``) with the archive on."""
        return 0 if self.archive_enabled else self.retention_ms

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


BRAND_KEY = r"^[a-z0-9_-]{1,32}$"


class Brand(BaseModel):
    """One game of the studio: what its players see (``RESETGATE_BRANDS``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, description="the game's name in emails")
    email_from: str = Field(default="", description='From of its emails; "": RESETGATE_EMAIL_FROM')
    reset_url_base: str = Field(
        default="", description='its reset page; "": RESETGATE_RESET_URL_BASE'
    )


class EmailSettings(_Env):
    """What the reset email says and where it points (the sender, ``resetgate templates``).
    A brand the directory names but this map lacks gets the defaults (docs/templates.md)."""

    reset_url_base: str = Field(
        default="https://game.example/reset-password",
        description="the game's reset page; the link's base",
    )
    email_from: str = Field(
        default="Account Recovery <no-reply@game.example>", description="From of reset emails"
    )
    brand_name: str = Field(
        default="Game Example",
        min_length=1,
        max_length=100,
        description="the game's name for accounts without a brand",
    )
    brands: dict[str, Brand] = Field(
        default_factory=dict,
        description='JSON: {"<brand>": {"name", "email_from", "reset_url_base"}}',
    )
    templates_dir: str = Field(default="", description='the studio\'s templates; "": shipped')
    default_locale: str = Field(default="en", description="locale of the fallback templates")

    @field_validator("brands")
    @classmethod
    def _brand_keys(cls, value: dict[str, Brand]) -> dict[str, Brand]:
        bad = [key for key in value if not re.match(BRAND_KEY, key)]
        if bad:
            raise ValueError(f"brand {bad[0]!r}: a-z, 0-9, _ and -, 1-32 characters")
        return value


SANDBOX_URL = "http://127.0.0.1:8090"  # the local sandbox provider (`resetgate up`)
PROVIDERS_VARIABLE = f"{ENV_PREFIX}PROVIDERS"


def providers_listed(environ: Mapping[str, str] | None = None) -> str:
    """``RESETGATE_PROVIDERS`` as set ("": one provider, the single-provider settings)."""
    return (os.environ if environ is None else environ).get(PROVIDERS_VARIABLE, "").strip()


def one_of(value: str, names: Collection[str]) -> str:
    """``value`` when it is one of ``names``, else the error pydantic gives a Literal field
    (for a choice the registry of provider kinds makes, not a type)."""
    if value not in names:
        *most, last = (repr(name) for name in names)
        expected = f"{', '.join(most)} or {last}" if most else last
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": expected}
        )
    return value


def provider_kinds() -> dict[str, Kind]:
    """Every provider kind by name (``shared.providers.registry``, each kind's own module).
    Looked up when an account is checked, not when this module loads: every service reads
    these settings, the registry imports every adapter, and the adapters read these settings.
    """
    from shared.providers.registry import KINDS

    return KINDS


def provider_prefix(name: str) -> str:
    """The prefix of a configured name's own variables (``RESETGATE_PROVIDER_PRIMARY_``)."""
    return f"{ENV_PREFIX}PROVIDER_{name.upper()}_"


class KindSettings(BaseModel):
    """The settings only one provider kind reads, declared in that kind's own module (its
    registry entry names the class, ``Kind.settings``) and carried to its adapter by the
    account (:attr:`ProviderAccount.kind_settings`, ``ProviderConfig.kind_settings``).

    Each field is read, like the account's own, as ``RESETGATE_<FIELD>`` for the single
    provider and ``RESETGATE_PROVIDER_<NAME>_<FIELD>`` for a configured name
    (:func:`read_kind`); a field with a ``validation_alias`` is read from the variables it
    names as they are, unprefixed (an SDK's own, ``AWS_REGION``). ``INHERITED``: the fields a
    configured name that leaves them unset takes from the single prefix (the process-wide
    value), as it does ``RESETGATE_PROVIDER_MAX_RATE``.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=False
    )

    INHERITED: ClassVar[tuple[str, ...]] = ()


K = TypeVar("K", bound=KindSettings)


def read_kind(cls: type[K], prefix: str = ENV_PREFIX, given: Mapping[str, Any] | None = None) -> K:
    """``cls`` read from the variables under ``prefix`` (``given``: values that win over the
    environment, as keyword arguments win over it for a settings class). A bad value is a
    ValueError of one line naming its variable."""
    environ = {key.lower(): value for key, value in os.environ.items()}
    values: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices | str):
            choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
            found = [environ.get(str(choice).lower(), "") for choice in choices]
            if any(found):
                values[name] = next(value for value in found if value)
        elif f"{prefix}{name}".lower() in environ:
            values[name] = environ[f"{prefix}{name}".lower()]
    values.update(given or {})
    try:
        return cls.model_validate(values)
    except ValidationError as error:
        raise ValueError(problems(error, prefix)) from None


def kind_settings_as(value: KindSettings, cls: type[K]) -> K:
    """``value`` as the kind's own class (an adapter's typed view of its settings): the
    class's defaults when none were read (a configuration built in code without them)."""
    if isinstance(value, cls):
        return value
    if type(value) is KindSettings:
        return cls()
    raise TypeError(f"{type(value).__name__} given where {cls.__name__} is read")


def inheriting(own: K, process_wide: K) -> K:
    """``own`` (a configured name's) with each of its class's ``INHERITED`` fields it leaves
    unset taken from ``process_wide`` (the single prefix's)."""
    unset = [field for field in own.INHERITED if field not in own.model_fields_set]
    return own.model_copy(update={field: getattr(process_wide, field) for field in unset})


class ProviderAccount(_Env):
    """One provider account: its kind, where it is, its key, its pacing ceiling and hosted
    template, and the settings only its kind reads (:attr:`kind_settings`, the kind's own
    :class:`KindSettings`). The single provider reads each field as ``RESETGATE_<FIELD>``
    (``RESETGATE_PROVIDER_KIND``, ``RESETGATE_MAILGUN_DOMAIN``); a name listed in
    ``RESETGATE_PROVIDERS`` reads it as ``RESETGATE_PROVIDER_<NAME>_<ALIAS>``
    (``..._KIND``, ``..._MAILGUN_DOMAIN``) through :meth:`of`.
    """

    # The single provider's variables are the field names, a named one's the aliases: each
    # prefix reads only its own, never RESETGATE_KIND nor RESETGATE_PROVIDER_X_PROVIDER_KIND.
    model_config = SettingsConfigDict(validate_by_alias=False, validate_by_name=True)

    provider_kind: str = Field(default="http", validation_alias="kind")
    # Base URL; for SES the endpoint override (empty: the region's endpoint). Empty for http:
    # the local sandbox; the other kinds require one.
    provider_url: str = Field(default="", validation_alias="url")
    provider_api_key: SecretStr = Field(default=SecretStr(""), validation_alias="api_key")
    provider_max_rate: float = Field(
        default=50.0, gt=0, validation_alias="max_rate", description="sends/s ceiling"
    )
    # A template the provider hosts (docs/templates.md): its id, alias or name, where
    # ``{locale}`` and ``{brand}`` are replaced; "" sends the local files' rendering.
    provider_template: str = Field(default="", max_length=256, validation_alias="template")
    # The locales the hosted templates exist in (comma-separated; "": the default locale).
    provider_template_locales: str = Field(default="", validation_alias="template_locales")
    # The settings only its kind reads (the kind's own class, KindSettings), read with the
    # rest of the account under the same prefix.
    _kind_settings: KindSettings = PrivateAttr(default_factory=KindSettings)

    @classmethod
    def of(cls, name: str) -> ProviderAccount:
        """The account of one configured name (``RESETGATE_PROVIDER_<NAME>_*``); a bad or
        missing setting is a ValueError of one line naming the variable."""
        return read_under(cls, provider_prefix(name))

    @classmethod
    def listed(cls) -> bool:
        """True for the account of a name in RESETGATE_PROVIDERS (read by the aliases)."""
        return bool(cls.model_config.get("validate_by_alias"))

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable ``field`` (its own or its kind's) is read from."""
        own = field in cls.model_fields
        key = cls.model_fields[field].validation_alias if own and cls.listed() else field
        return f"{cls.model_config.get('env_prefix', ENV_PREFIX)}{key}".upper()

    @field_validator("provider_kind")
    @classmethod
    def _kind_known(cls, value: str) -> str:
        return one_of(value, provider_kinds())

    @field_validator("provider_url")
    @classmethod
    def _url_default(cls, value: str, info: ValidationInfo) -> str:
        if not value and info.data.get("provider_kind") == "http":
            return SANDBOX_URL
        return value

    @classmethod
    def declared_kind(cls) -> str:
        """The kind as set, read without checking the rest of the account (on-call's views
        show the kind of an account that does not load)."""
        default = str(cls.model_fields["provider_kind"].default)
        return os.environ.get(cls.variable("provider_kind"), default)

    @property
    def kind_settings(self) -> KindSettings:
        """The settings only this account's kind reads (its entry's ``settings`` class)."""
        return self._kind_settings

    @model_validator(mode="wrap")
    @classmethod
    def _account_complete(
        cls, data: Any, handler: ModelWrapValidatorHandler[ProviderAccount]
    ) -> ProviderAccount:
        # A kind's setting given as a keyword (as the environment would give it) goes to its
        # kind's class, read with the account under the account's prefix.
        kinds = provider_kinds()
        given: dict[str, Any] = {}
        if isinstance(data, dict):
            fields = {name for kind in kinds.values() for name in kind.settings.model_fields}
            given = {name: value for name, value in data.items() if name in fields}
            data = {name: value for name, value in data.items() if name not in fields}
        account = handler(data)
        own = kinds[account.provider_kind].settings
        prefix = str(cls.model_config.get("env_prefix") or ENV_PREFIX)
        mine = {name: value for name, value in given.items() if name in own.model_fields}
        account._kind_settings = read_kind(own, prefix, mine)
        if not account.listed() and providers_listed():
            return account  # several named providers: each name's own account is checked
        missing = account._missing()
        if missing:
            raise ValueError(missing)
        return account

    def _missing(self) -> str:
        """What this account lacks, as one line naming the variable ("" if none)."""
        if self.listed() and "provider_kind" not in self.model_fields_set:
            kinds = ", ".join(provider_kinds())
            return f"{self.variable('provider_kind')}: must be one of {kinds}"
        return provider_kinds()[self.provider_kind].lacks(self)  # the kind's own entry


class ProviderSettings(CommonSettings, ProviderAccount):
    """The provider settings of a process (the sender, the poller): the single provider's
    account (``RESETGATE_PROVIDERS`` names more, ``shared.providers.named``) and what every
    provider it talks to shares. ``shared.providers.kind.ProviderConfig`` is what an
    adapter is built from.
    """

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

    max_advised_wait_ms: ClassVar[InMs] = InMs()


S = TypeVar("S", bound=BaseSettings)


def describe_error(error: ValidationError, prefix: str = ENV_PREFIX) -> str:
    """One line naming the variable(s) and what is wrong, never echoing a secret value (nor
    pydantic's "For further information visit ..." line, which tells an operator nothing)."""
    return "invalid configuration: " + problems(error, prefix)


def problems(error: ValidationError, prefix: str) -> str:
    """What ``error`` says is wrong, each part led by the variable it is about."""
    parts = []
    for item in error.errors():
        loc = "_".join(str(p) for p in item["loc"]).upper()
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{prefix}{loc}: {message}" if loc else message)
    return "; ".join(parts)


def read_under(cls: type[S], prefix: str) -> S:
    """``cls`` read from the variables under another prefix, a configured provider name's
    own (``RESETGATE_PROVIDER_<NAME>_``), each field by its alias where it has one; a bad
    value is a ValueError of one line naming its variable."""
    config = SettingsConfigDict(
        env_prefix=prefix, env_prefix_target="all", validate_by_alias=True, validate_by_name=False
    )
    prefixed: Any = type(f"{cls.__name__}_{prefix}", (cls,), {"model_config": config})
    try:
        return cast(S, prefixed())
    except ValidationError as error:
        raise ValueError(problems(error, prefix)) from None


def load(cls: type[S]) -> S:
    """Build settings from the environment or stop the process with one clear line."""
    try:
        return cls()
    except ValidationError as error:
        prefix = str(cls.model_config.get("env_prefix") or ENV_PREFIX)
        print(describe_error(error, prefix), file=sys.stderr)
        raise SystemExit(2) from None
