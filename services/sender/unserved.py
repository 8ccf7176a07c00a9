"""Partitions assigned to a provider this sender does not have: said loudly, because
nothing else says it. Such a partition's jobs are skipped (``Sender.runner_for`` is None):
they wait with 0 attempts, never fail, and look like a quiet partition. A switch to a name
later dropped from ``RESETGATE_PROVIDERS`` leaves exactly that behind.

Logged when the set changes and every ``LOG_SECONDS`` while it lasts; exported as
``resetgate_partition_unserved`` (the PartitionProviderNotConfigured page, docs/runbook.md).
"""

from __future__ import annotations

import logging
import time

from shared import control, metrics
from shared.logging import event

log = logging.getLogger(__name__)
LOG_SECONDS = 60.0


class Unserved:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.current: dict[int, str] = {}  # partition -> its provider, not configured here
        self._exported: dict[int, str] = {}  # partition -> provider label last exported
        self._logged = -LOG_SECONDS  # monotonic s of the last log line

    def report(self, state: control.ControlState, default: str, configured: frozenset[str]) -> None:
        assigned = {p: state.provider_for(p, default) for p in range(self.partitions)}
        unserved = {p: name for p, name in assigned.items() if name not in configured}
        changed, self.current = unserved != self.current, unserved
        for p, name in assigned.items():
            self._export(p, name, p in unserved)
        now = time.monotonic()
        if unserved and (changed or now - self._logged >= LOG_SECONDS):
            self._logged = now
            event(
                log,
                logging.ERROR,
                "partitions assigned to a provider not configured here: nothing sends them",
                partitions=sorted(unserved),
                providers=sorted(set(unserved.values())),
                configured=sorted(configured),
                fix="resetgate ops provider switch --partitions P --to a configured "
                "provider, or configure the provider",
            )

    def _export(self, partition: int, provider: str, unserved: bool) -> None:
        old = self._exported.get(partition)
        if old is not None and old != provider:
            metrics.partition_unserved.remove(str(partition), old)
        self._exported[partition] = provider
        metrics.partition_unserved.labels(str(partition), provider).set(int(unserved))
