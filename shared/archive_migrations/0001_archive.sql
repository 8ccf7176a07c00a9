-- The evidence archive: each settled operation as Redis held it, its attempt ledger, its
-- delivery events, and the operator actions and support cases that name it (docs/archive.md).
-- Every table is partitioned by month on settled_at, and every primary key includes it, so
-- retention drops whole partitions (shared/archive_schema.py), never a bulk DELETE.
-- Times Redis keeps in milliseconds are kept as Redis wrote them (in "hash" and "row"); only
-- settled_at and created_at are timestamps, for partitioning and the account's history.

CREATE TABLE operations (
    settled_at timestamptz NOT NULL,
    operation_id text NOT NULL,
    account_id text NOT NULL,
    created_at timestamptz NOT NULL,
    state text NOT NULL,
    provider text NOT NULL,
    provider_message_id text NOT NULL,
    reason text NOT NULL,
    hash jsonb NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_id, settled_at)
) PARTITION BY RANGE (settled_at);

-- The account's history (GET .../accounts/{id}/recovery-operations?since=...).
CREATE INDEX operations_account ON operations (account_id, created_at);

CREATE TABLE attempts (
    settled_at timestamptz NOT NULL,
    operation_id text NOT NULL,
    position integer NOT NULL,
    row text NOT NULL,
    PRIMARY KEY (operation_id, settled_at, position)
) PARTITION BY RANGE (settled_at);

CREATE TABLE delivery_events (
    settled_at timestamptz NOT NULL,
    operation_id text NOT NULL,
    delivery text NOT NULL,
    event_at bigint NOT NULL,
    observed_at bigint NOT NULL,
    PRIMARY KEY (operation_id, settled_at, delivery, event_at)
) PARTITION BY RANGE (settled_at);

CREATE TABLE operator_actions (
    settled_at timestamptz NOT NULL,
    operation_id text NOT NULL,
    entry_id text NOT NULL,
    fields jsonb NOT NULL,
    PRIMARY KEY (operation_id, settled_at, entry_id)
) PARTITION BY RANGE (settled_at);

CREATE TABLE support_cases (
    settled_at timestamptz NOT NULL,
    operation_id text NOT NULL,
    entry_id text NOT NULL,
    fields jsonb NOT NULL,
    PRIMARY KEY (operation_id, settled_at, entry_id)
) PARTITION BY RANGE (settled_at);
