"""SCAN/KEYS patterns over every partition, built by shared.keys so no test spells a key."""

from __future__ import annotations

from shared.keys import PREFIX, PartitionKeys


class _AnyPartition(PartitionKeys):
    @property
    def tag(self) -> str:
        return f"{PREFIX}:{{*}}"


# ANY_PARTITION.live == "rg:{*}:live"; ANY_PARTITION.operation("*") matches every
# operation hash and attempt ledger.
ANY_PARTITION: PartitionKeys = _AnyPartition(-1)
