"""Every Redis key resetgate uses, built in one place.

Partition ``p`` owns every key tagged ``{p}``; a Lua script only ever touches keys of one
partition (or of one provider), so the design runs unchanged on Redis Cluster. Scripts get
their keys through KEYS, never by building names themselves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from shared.ids import valid_operation_id

PREFIX = "rg"
SEND_GROUP = "senders"
JOB_FIELD = "op"  # a send stream entry's field: the operation id
# The W3C trace context (shared/tracing.py) of an operation's admission: kept in its hash, and
# beside JOB_FIELD in every entry that hands the operation on (a send job, a retry, a
# settlement), when traces were on. Not secret: random ids, flags and the caller's vendor
# entries (tracestate, only when it had some).
TRACE_FIELD = "traceparent"
TRACESTATE_FIELD = "tracestate"
# Beside a trace context in a send job that is not the admission's (a retry, a replay, a
# release): its attempt starts a trace of its own, linked to that context, not continuing it.
RETRY_FIELD = "is_retry"
# Beside JOB_FIELD in an admission's send job: the operation's account (an id, never an
# address), so the sender asks the directory in the same round trip as it begins the attempt
# (services/sender/message.py). A job without it (a retry's) is read one step after the other.
ACCOUNT_FIELD = "acct"
ROUTER_GROUP = "router"
ARCHIVE_GROUP = "archivers"  # the archiver replicas' group on each partition's settled stream
# The per-partition indexes of recently finished operations (finished, bounced) keep a day,
# and at most this many each, trimmed by the script that writes them.
RECENT_KEEP_MS = 86_400_000
RECENT_MAX = 5_000

# Global (untagged) keys: each is used on its own, never together with another in a script.
CONTROL = f"{PREFIX}:control"  # hash: paused:<p> -> reason, auth_paused:<provider> -> reason
CONTACT_FORMS = f"{PREFIX}:contact-forms"
SUPPORT_CASES = f"{PREFIX}:support-cases"
CONTACT_FORMS_DEAD = f"{PREFIX}:contact-forms:dead"
POLLER_CURSOR = f"{PREFIX}:poller:cursor"  # + ":" + provider name: each feed's own cursor
POLLER_LEASE = f"{PREFIX}:poller:lease"  # the one poller replica allowed to call the provider
# + event_id -> hash(case_id, status claimed|written, claimed_at), with a TTL
ROUTER_SEEN_PREFIX = f"{PREFIX}:router:seen:"
# + contact-form entry id -> hash of the routed fields only, while the form is being routed
# (the entry itself is deleted from rg:contact-forms as soon as it is read: services/router)
ROUTER_FORM_PREFIX = f"{PREFIX}:router:form:"
ROUTER_RETRY = f"{PREFIX}:router:retry"  # zset: entry id -> when to try routing it again (ms)
# The Redis stand-in for the studio's account directory: apart from the operation store.
DIRECTORY_PREFIX = "rgdir:"
DIRECTORY_LOGIN_PREFIX = f"{DIRECTORY_PREFIX}login:"  # + normalised login -> account_id
DIRECTORY_ACCOUNT_PREFIX = f"{DIRECTORY_PREFIX}acct:"  # + account_id -> hash(email, locale)
IP_LIMIT_PREFIX = f"{PREFIX}:iplimit:"  # + client ip -> GCRA theoretical arrival time
# + provider + ":" + sha256(webhook token) -> "1", with a TTL: a signed token honoured once
WEBHOOK_TOKEN_PREFIX = f"{PREFIX}:webhook-token:"
# provider name -> the daily quota the senders keep to (JSON: limit, window_ms), as the
# senders derived it at start (shared.quota.publish); admission sizes its public budget on it.
DAILY_QUOTAS = f"{PREFIX}:daily-quotas"
# The public endpoint's admissions per slice of the quota window (quota_take.lua's shape).
PUBLIC_BUDGET = f"{PREFIX}:public-budget"
# Operator actions (quarantine, release, pause, resume) with their actor: a capped stream.
AUDIT = f"{PREFIX}:audit"
# + sha256(console session id) -> hash(actor, roles, expires_at); the id itself is never stored.
CONSOLE_SESSION_PREFIX = f"{PREFIX}:console:session:"
# + client address -> GCRA theoretical arrival time of the console's token sign-in attempts
CONSOLE_SIGN_IN_LIMIT_PREFIX = f"{PREFIX}:console:sign-in-limit:"
# hash: provider name -> JSON {"checked_at": ms, "checks": [...]}, the sender's latest preflight
PROVIDER_CHECKS = f"{PREFIX}:provider-checks"
# hash: "plan" -> the progressive switch (JSON, shared/progressive.py), "stop" -> a person's
# request to stop it (JSON: actor, rollback, at); its driver holds PROGRESSIVE_LEASE.
PROGRESSIVE = f"{PREFIX}:progressive"
PROGRESSIVE_LEASE = f"{PREFIX}:progressive:lease"


def poller_cursor(provider: str) -> str:
    """Where the poller keeps its place in one provider's events feed."""
    return f"{POLLER_CURSOR}:{provider}"


def router_seen(event_id: str) -> str:
    """The router's record of one contact-form event: claimed, then its case written."""
    return ROUTER_SEEN_PREFIX + event_id


def partition_of(account_id: str, partitions: int) -> int:
    """A stable account -> partition map: the same on every process and every release."""
    digest = hashlib.blake2b(account_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def partition_of_operation(operation_id: str) -> int:
    """Operation ids carry their partition (``op-<p>-<ulid>``), so lookups need no index.
    Anything else (``op-8-<ulid>:attempts`` names another key) is a ValueError."""
    if not valid_operation_id(operation_id):
        raise ValueError("not a resetgate operation id")
    return int(operation_id.split("-", 2)[1])


@dataclass(frozen=True, slots=True)
class PartitionKeys:
    """The keys of one partition; all share the hash tag ``{p}``."""

    partition: int

    @classmethod
    def of(cls, operation_id: str) -> PartitionKeys:
        """The partition that owns an operation (the id carries it)."""
        return cls(partition_of_operation(operation_id))

    @property
    def tag(self) -> str:
        return f"{PREFIX}:{{{self.partition}}}"

    def account(self, account_id: str) -> str:
        return f"{self.tag}:acct:{account_id}"

    def operation(self, operation_id: str) -> str:
        return f"{self.tag}:op:{operation_id}"

    def attempts(self, operation_id: str) -> str:
        return f"{self.tag}:op:{operation_id}:attempts"

    @property
    def send(self) -> str:
        """Stream of send jobs, consumer group ``senders``."""
        return f"{self.tag}:send"

    @property
    def due(self) -> str:
        """Sorted set: deferred operation id -> next attempt (ms)."""
        return f"{self.tag}:due"

    @property
    def observe(self) -> str:
        """Sorted set: accepted operation id -> observation window end (ms)."""
        return f"{self.tag}:observe"

    @property
    def ambiguous(self) -> str:
        """Sorted set: ambiguous operation id -> when it became ambiguous (ms)."""
        return f"{self.tag}:ambiguous"

    @property
    def review(self) -> str:
        """Sorted set: operation id held for a person -> since (ms)."""
        return f"{self.tag}:review"

    @property
    def messages(self) -> str:
        """Hash: provider message id -> operation id."""
        return f"{self.tag}:msgs"

    @property
    def settled(self) -> str:
        """Stream of settled operation ids awaiting the archive, consumer group ``archivers``
        (written only while the archive is on: shared/scripts ``-- @settle``)."""
        return f"{self.tag}:settled"

    @property
    def finished(self) -> str:
        """Sorted set: operation id that ended failed or exhausted -> when (ms); bounded by
        RECENT_KEEP_MS and RECENT_MAX, written by the script that ends it."""
        return f"{self.tag}:finished"

    @property
    def bounced(self) -> str:
        """Sorted set: operation id whose email bounced -> when recorded (ms); bounded as
        ``finished``."""
        return f"{self.tag}:bounced"

    @property
    def live(self) -> str:
        """Sorted set: every non-terminal operation id -> created (ms); the oldest-first view."""
        return f"{self.tag}:live"


def provider_pacing(provider: str) -> str:
    """Provider-wide token bucket and blocked-until, shared by every sender replica."""
    return f"{PREFIX}:{{provider:{provider}}}:pacing"


def provider_minutes(provider: str) -> str:
    """Hash: the provider's last hour per minute for on-call's charts, a ring of 60 slots
    (``shared/scripts/chart_sample.lua``); expires an hour and more after its last sample."""
    return f"{PREFIX}:{{provider:{provider}}}:minutes"


def provider_quota(provider: str) -> str:
    """Sends counted against the provider's daily quota, per slice of its window."""
    return f"{PREFIX}:{{provider:{provider}}}:quota"


def directory_login(login: str) -> str:
    return DIRECTORY_LOGIN_PREFIX + login


def directory_account(account_id: str) -> str:
    return DIRECTORY_ACCOUNT_PREFIX + account_id


def webhook_token(provider: str, digest: str) -> str:
    return f"{WEBHOOK_TOKEN_PREFIX}{provider}:{digest}"


def ip_limit(client_ip: str) -> str:
    return IP_LIMIT_PREFIX + client_ip


def console_session(session_hash: str) -> str:
    return CONSOLE_SESSION_PREFIX + session_hash


def console_sign_in_limit(client_ip: str) -> str:
    return CONSOLE_SIGN_IN_LIMIT_PREFIX + client_ip
