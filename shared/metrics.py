"""Every Prometheus metric resetgate exports, defined once.

Labels never carry an account, an operation id, an address or a token: only partitions,
providers, outcomes and entry points, so cardinality stays bounded.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LAG_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)

admissions = Counter(
    "resetgate_admissions",
    "Recovery requests by entry point and admission result.",
    ["entry_point", "result"],
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
pacing_blocked_until = Gauge(
    "resetgate_pacing_blocked_until_seconds",
    "Unix time sending is blocked until (0: not).",
    ["provider"],
)
provider_auth_paused = Gauge(
    "resetgate_provider_auth_paused", "1 while the provider rejects our credentials.", ["provider"]
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
    "resetgate_reconciliations", "Ambiguous attempts reconciled, by outcome.", ["outcome"]
)
reconciliation_lag = Histogram(
    "resetgate_reconciliation_lag_seconds", "Ambiguous to reconciled.", buckets=LAG_BUCKETS
)
poll_requests = Counter(
    "resetgate_poll_requests", "Poller requests to the provider.", ["route", "status"]
)
poll_throttled = Counter("resetgate_poll_throttled", "429s on polling routes.", ["route"])
poll_cursor_resets = Counter(
    "resetgate_poll_cursor_resets",
    "Times the events feed refused the stored cursor as beyond its end (the provider lost its "
    "feed, e.g. a restarted sandbox) and the poller read the feed again from its start.",
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
