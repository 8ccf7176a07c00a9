"""The demo accounts cover every partition (a switch of partitions 0-1 had none to try), and
the banner states the cooldown and the per-address limit with the values in force."""

from __future__ import annotations

import csv
import io

import pytest

from services.ctl import demo
from shared.keys import partition_of


@pytest.mark.parametrize("partitions", [1, 4, 16, 64])
def test_one_demo_account_lands_in_each_partition(partitions: int) -> None:
    rows = list(
        csv.DictReader(io.StringIO(demo.accounts_csv({"RESETGATE_PARTITIONS": str(partitions)})))
    )
    by_login = {row["login"]: row["account_id"] for row in rows}
    for p in range(partitions):
        assert partition_of(by_login[f"demo-p{p}"], partitions) == p
    assert len(rows) == len(demo.NAMED) + partitions, "one each, nothing more"
    assert len({row["account_id"] for row in rows}) == len(rows)
    assert {row["login"] for row in rows} >= {login for login, *_ in demo.NAMED}


def test_the_banner_states_the_cooldown_and_the_address_limit_in_force() -> None:
    told = "\n".join(
        demo.banner_lines({"RESETGATE_COOLDOWN_SECONDS": "120", "RESETGATE_IP_LIMIT_BURST": "4"})
    )
    assert "within 120 s (RESETGATE_COOLDOWN_SECONDS)" in told
    assert "takes 4 requests at once per client address, then 30/min" in told
    assert "demo-p0 ... demo-p15" in told
