"""Every Prometheus metric resetgate exports, defined once.

Labels never carry an account, an operation id, an address or a token: only partitions,
providers, outcomes and entry points, so cardinality stays bounded.

Each service exports only the families it sets (:data:`OWNERS`, applied by
:func:`export_only` when a service starts): an unlabelled gauge another service never sets
would read 0 there and hide the ``absent()`` the alerts rely on.
"""

from __future__ import annotations

import contextlib

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LAG_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)

admissions = Counter(
    "resetgate_admissions",
    "Recovery requests by entry point and admission result.",
    ["entry_point", "result"],
)
public_budget_used = Gauge(
    "resetgate_public_budget_used",
    "Operations the public endpoint created in the current quota window, as this replica "
    "last read the shared count (services/admission/budget.py).",
)
public_budget_limit = Gauge(
    "resetgate_public_budget_limit",
    "Operations the public endpoint may create per quota window: the provider's daily "
    "quota less the share reserved for agents and contact forms (0: no quota, no budget).",
)
public_floor_passed = Counter(
    "resetgate_public_floor_passed",
    "Public answers whose work took longer than RESETGATE_PUBLIC_RESPONSE_FLOOR_MS, so the "
    "floor did not hide their timing: if it grows, raise the floor or add replicas.",
)
http_request_duration = Histogram(
    "resetgate_http_request_duration_seconds",
    "HTTP request latency.",
    ["service", "route", "method", "status"],
    buckets=LATENCY_BUCKETS,
)
send_attempts = Counter(
    "resetgate_send_attempts",
    "Send attempts by provider and outcome class.",
    ["provider", "outcome"],
)
provider_throttled = Counter(
    "resetgate_provider_throttled", "429 answers received on send.", ["provider"]
)
provider_redirects = Counter(
    "resetgate_provider_redirects",
    "3xx answers from a provider; never followed (a send is retried, a poll is unusable).",
    ["provider", "method"],
)
retry_after_source = Counter(
    "resetgate_retry_after_source",
    "Where a throttled attempt's next time came from.",
    ["provider", "source"],
)
operations_exhausted = Counter(
    "resetgate_operations_exhausted",
    "Operations that spent their attempt budget or horizon.",
    ["partition", "reason"],
)
operations_terminal = Counter(
    "resetgate_operations_terminal",
    "Operations reaching a terminal state.",
    ["partition", "state"],
)
ambiguous_attempts = Counter(
    "resetgate_ambiguous_attempts", "Attempts whose outcome is unknown.", ["provider", "partition"]
)
pacing_rate = Gauge(
    "resetgate_pacing_rate", "Provider-wide sends/s currently allowed.", ["provider"]
)
pacing_cuts = Counter(
    "resetgate_pacing_cuts",
    "Cuts of the provider-wide rate (429s of sends reserved after the previous cut).",
    ["provider"],
)
pacing_blocked_until = Gauge(
    "resetgate_pacing_blocked_until_seconds",
    "Unix time sending is blocked until (0: not).",
    ["provider"],
)
provider_auth_paused = Gauge(
    "resetgate_provider_auth_paused", "1 while the provider rejects our credentials.", ["provider"]
)
provider_paused = Gauge(
    "resetgate_provider_paused",
    "1 while sending through the provider is paused for this kind of cause (credentials, "
    "account, refusals); every kind is exported, 0 when not the cause.",
    ["provider", "kind"],
)
provider_check = Gauge(
    "resetgate_provider_check",
    "The latest preflight check of a provider (resetgate providers check): 1 passes, 0 "
    "unknown (the key's scope or the provider cannot tell), -1 fails.",
    ["provider", "check"],
)
oldest_eligible_age = Gauge(
    "resetgate_oldest_eligible_age_seconds",
    "Age of the oldest operation due now and not yet attempted (deferrals excluded).",
    ["partition"],
)
queue_depth = Gauge(
    "resetgate_queue_depth", "Operations waiting, by queue.", ["partition", "queue"]
)
partition_paused = Gauge(
    "resetgate_partition_paused", "1 while a partition is paused.", ["partition"]
)
# Joins the per-partition families (queue age, depths) to a provider: one series per
# partition, moved by `resetgate ops provider switch`.
partition_provider = Gauge(
    "resetgate_partition_provider",
    "1 for the provider a partition sends through.",
    ["partition", "provider"],
)
# 1 while a partition is assigned to a provider this sender does not have (a switch to a
# name later dropped from RESETGATE_PROVIDERS): it skips the partition, and nothing else
# would say so (the PartitionProviderNotConfigured page).
partition_unserved = Gauge(
    "resetgate_partition_unserved",
    "1 while the partition's provider is not configured on this sender (it sends nothing).",
    ["partition", "provider"],
)
token_ttl = Gauge("resetgate_token_ttl_seconds", "Configured reset-token lifetime.")
observation_lag = Histogram(
    "resetgate_observation_lag_seconds",
    "Delivery event occurred_at to observed.",
    buckets=LAG_BUCKETS,
)
delivery_events = Counter("resetgate_delivery_events", "Delivery events observed.", ["type"])
delivery_events_duplicate = Counter(
    "resetgate_delivery_events_duplicate", "Duplicate delivery events dropped."
)
observation_pending = Gauge(
    "resetgate_observation_pending",
    "Accepted operations with no delivery event yet.",
    ["partition"],
)
reconciliations = Counter(
    "resetgate_reconciliations",
    "Ambiguous attempts reconciled, by the provider that held them and outcome.",
    ["provider", "outcome"],
)
reconciliation_lag = Histogram(
    "resetgate_reconciliation_lag_seconds", "Ambiguous to reconciled.", buckets=LAG_BUCKETS
)
poll_requests = Counter(
    "resetgate_poll_requests", "Poller requests to a provider.", ["provider", "route", "status"]
)
poll_throttled = Counter(
    "resetgate_poll_throttled", "429s on a provider's polling routes.", ["provider", "route"]
)
poll_cursor_resets = Counter(
    "resetgate_poll_cursor_resets",
    "Times the events feed refused the stored cursor as beyond its end (the provider lost its "
    "feed, e.g. a restarted sandbox) and the poller read the feed again from its start.",
    ["provider"],
)
support_cases = Counter(
    "resetgate_support_cases",
    "Support cases written, by queue and priority.",
    ["queue", "priority"],
)
contact_forms_dead_lettered = Counter(
    "resetgate_contact_forms_dead_lettered", "Contact-form events dead-lettered.", ["reason"]
)
routing_latency = Histogram(
    "resetgate_routing_latency_seconds",
    "Contact form submitted to case written.",
    buckets=LAG_BUCKETS,
)
redis_up = Gauge("resetgate_redis_up", "1 while Redis answers.", ["service"])
advised_wait_capped = Counter(
    "resetgate_advised_wait_capped",
    "Provider-advised waits (Retry-After) longer than RESETGATE_MAX_ADVISED_WAIT_SECONDS, "
    "cut to it.",
    ["loop"],
)
poller_last_success = Gauge(
    "resetgate_poller_last_success_timestamp_seconds",
    "Unix time of the poller's last successful events page or lookup with a provider, or of "
    "its last step with nothing waiting on that provider (its start until then).",
    ["provider"],
)

inbound_events = Counter(
    "resetgate_inbound_events",
    "Pushed delivery events received (webhooks, SES queue), by provider and the provider's "
    "own event name from its table.",
    ["provider", "kind"],
)
inbound_events_dropped = Counter(
    "resetgate_inbound_events_dropped",
    "Pushed delivery events counted and dropped, by provider and reason.",
    ["provider", "reason"],
)
inbound_settled = Counter(
    "resetgate_inbound_settled",
    "Ambiguous attempts settled as accepted because a pushed event proved the provider had "
    "the message.",
    ["provider"],
)
webhook_requests = Counter(
    "resetgate_webhook_requests",
    "Webhook requests answered, by provider and status.",
    ["provider", "status"],
)
queue_messages = Counter(
    "resetgate_queue_messages",
    "SQS messages handled, by result (applied, dead_lettered, returned, released).",
    ["provider", "result"],
)
redis_maxmemory_policy = Gauge(
    "resetgate_redis_maxmemory_policy",
    "1 for Redis's maxmemory-policy as read at start (unknown: CONFIG GET refused).",
    ["policy"],
)
send_twice_exposure = Gauge(
    "resetgate_send_twice_exposure",
    "1 when a Redis host crash could make this provider send an email twice: it has no "
    "idempotency key and Redis is not verified appendonly with appendfsync always.",
    ["provider", "appendfsync"],
)
archive_lag = Gauge(
    "resetgate_archive_lag_seconds",
    "Age of the oldest settled operation not yet in the archive (0: none waiting).",
)
archive_up = Gauge("resetgate_archive_up", "1 while the archive (PostgreSQL) answers.")
archived_operations = Counter(
    "resetgate_archived_operations",
    "Settled operations written to the archive, by result.",
    ["result"],
)
archive_partitions_dropped = Counter(
    "resetgate_archive_partitions_dropped", "Archive partitions dropped past retention."
)
failover_partitions = Gauge(
    "resetgate_failover_partitions",
    "Partitions the failover policy has moved from provider to standby (the progressive "
    "switch it started; exported by the sender driving it, 0 once rolled back).",
    ["provider", "standby", "reason"],
)

# Families every service exports: its HTTP latency and what it sees of Redis.
COMMON: tuple[MetricWrapperBase, ...] = (http_request_duration, redis_up, redis_maxmemory_policy)
# The families each service sets (tests/e2e/test_metric_families.py holds this to the code).
OWNERS: dict[str, tuple[MetricWrapperBase, ...]] = {
    "admission": (
        admissions,
        token_ttl,
        public_budget_used,
        public_budget_limit,
        public_floor_passed,
    ),
    "sender": (
        send_attempts,
        provider_throttled,
        retry_after_source,
        operations_exhausted,
        operations_terminal,
        ambiguous_attempts,
        pacing_rate,
        pacing_blocked_until,
        provider_auth_paused,
        provider_paused,
        oldest_eligible_age,
        queue_depth,
        partition_paused,
        token_ttl,
        advised_wait_capped,
        pacing_cuts,
        provider_redirects,
        partition_provider,
        send_twice_exposure,
        partition_unserved,
        provider_check,
        failover_partitions,
    ),
    "poller": (
        delivery_events,
        delivery_events_duplicate,
        observation_lag,
        observation_pending,
        reconciliations,
        reconciliation_lag,
        poll_requests,
        poll_throttled,
        inbound_events,
        inbound_events_dropped,
        inbound_settled,
        webhook_requests,
        queue_messages,
        advised_wait_capped,
        poller_last_success,
        poll_cursor_resets,
        provider_redirects,
    ),
    "router": (admissions, support_cases, routing_latency, contact_forms_dead_lettered),
    "archiver": (archive_lag, archive_up, archived_operations, archive_partitions_dropped),
}


def families() -> list[MetricWrapperBase]:
    """Every family defined above."""
    return [value for value in globals().values() if isinstance(value, MetricWrapperBase)]


def export_only(service: str) -> None:
    """Take the families other services own out of this process's /metrics.

    A family no service owns (one added without a line in OWNERS) stays everywhere rather
    than vanish from the service that sets it: a forgotten line shows too much, never too
    little; the e2e test names it.
    """
    mine = {id(family) for family in (*COMMON, *OWNERS.get(service, ()))}
    others = {id(family) for families in OWNERS.values() for family in families} - mine
    for family in families():
        if id(family) in others:
            with contextlib.suppress(KeyError):  # already taken out
                REGISTRY.unregister(family)
