"""Names vulture (``make deadcode``) would report that are used where it cannot see.

Each group says who uses them; a name that is really dead is removed from the code, not
listed here.
"""

# vulture reads these bare names as uses; the file is never imported.
# ruff: noqa: B018, F821

# asyncio.Protocol callbacks (shared/fastredis.py): called by the event loop.
connection_made
data_received
connection_lost

# pydantic settings fields read from the environment by name (RESETGATE_SANDBOX_...),
# and settings_customise_sources' signature (tests/support/sandbox.py).
error_probability
error_every
slow_probability
slow_every
drop_probability
drop_every
duplicate_event_probability
duplicate_event_every
out_of_order_probability
out_of_order_every
poll_error_probability
poll_error_every
late_error_probability
late_error_every
settings_cls
env_settings
dotenv_settings
file_secret_settings

# Enum members and dataclass fields: values the store, the API or a provider carries, part
# of the type even where no code names them.
COOLDOWN  # shared/admit.py AdmitResult
RESEND  # shared/model.py EntryPoint
AGENT
AUTOMATION
ACCOUNT  # shared/control.py PauseKind (adapters set it by value: base.account_refused)
reconciled_at  # shared/model.py Attempt (decoded from the ledger)
RATE_RESET  # shared/retry_after.py Source
DIRECT  # tests/chaos/driver.py
via  # services/admission/console/context.py
how  # shared/providers/base.py: the adapter contract's fields
rate_signals
max_message_bytes
max_recipients
success_statuses

# Test-side: hooks and attributes a library calls or sets.
exc_type  # __exit__ signature (tests/alerts/prometheus.py)
crash_kind  # tests/chaos/crashable_redis.py
binary_location  # selenium options (tests/console/browser.py)
redirect_request  # urllib's redirect handler hook (tests/console/test_listener.py)
aws_env  # a fixture requested by name (tests/providers/test_ses_moto.py)
pytest_collection_modifyitems  # a pytest hook (tests/conftest.py: xdist groups)

# Script request fields (shared.scripts.Request): read by position, through one
# operator.attrgetter per request class, into ARGV; reply codes a script returns.
expected_id  # shared/scripts/admission.py Admit
cooldown_ms
account_retention_ms
event_type  # shared/scripts/observation.py ApplyDelivery
slice_ms  # shared/scripts/pacing.py QuotaTake
returned_ms  # shared/scripts/pacing.py Observation (sent by PaceFeedback)
advised_rate
growth  # shared/scripts/pacing.py Tuning (its part_of fields, sent by PaceAcquire)
quiet_ms
slot_rate
stale_ms  # shared/scripts/router.py RouteClaim
max_gap_ms  # shared/scripts/charts.py ChartSample
keep_ms  # shared/scripts/charts.py ChartSample
FENCED  # shared/scripts/attempts.py FinaliseCode
STALE  # shared/scripts/attempts.py Settled
tail_ms  # shared/scripts/archive.py MarkArchived
delivery_event_at
MOVED  # shared/scripts/archive.py Marked (counted by its value in the archiver's metric)
CHANGED
settled_at  # shared/archive.py Archived (when it settled, for a reader of the dataclass)

# A seconds setting read only through its milliseconds view (shared/clock.py InMs reads
# ``<name>_seconds`` by name).
archive_tail_seconds
backoff_base_seconds
backoff_cap_seconds
cooldown_seconds
form_retention_seconds
observation_window_seconds
quota_window_seconds
refusal_guard_window_seconds
retention_seconds
seen_ttl_seconds

# logging's module switches (shared/logging.py setup): read by logging.LogRecord and
# Logger.findCaller, not by our code.
_srcfile
logThreads
logProcesses
logMultiprocessing

# The standard library's tempfile reads it (tests/support/leftovers.py sets it for the
# process that already cached its temporary directory).
tempdir

# The registry test's made-up kind (tests/providers/test_registry.py): a settings field whose
# being declared in two places is what the test checks.
pigeon_region
