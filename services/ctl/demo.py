"""The demo accounts `resetgate up` seeds, and what a newcomer trying them meets.

Beside the named ones (a delivery, a French email, a bounce) there is one account per
partition (login ``demo-pN`` lands in partition N), so a partition switch such as
``--partitions 0-1`` has accounts to try it with. A repeated reset meets the cooldown and
the public endpoint's per-address limit: the banner says both, with the values in force.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings

from shared.keys import partition_of
from shared.settings import PolicySettings, PublicLimitSettings, RedisSettings

# login, account id, address, locale, what it shows
NAMED = [
    ("player1", "acct-1001", "player1@example.com", "en", "delivered"),
    ("player2", "acct-1002", "player2@example.com", "en", "delivered"),
    ("joueur1", "acct-1004", "joueur1@example.com", "fr", "delivered, French email"),
    ("bounce-me", "acct-1003", "someone@bounce.example", "en", "bounces"),
]
PER_PARTITION_LOGIN = "demo-p{}"


def setting(env: dict[str, str], name: str, model: type[BaseSettings]) -> int:
    """A setting's value as the services read it: the environment's, else its default."""
    raw = env.get(f"RESETGATE_{name.upper()}", "")
    return int(raw) if raw.isdigit() else int(model.model_fields[name].default)


def per_partition(partitions: int) -> list[tuple[str, str, str, str, str]]:
    """``demo-pN`` for every partition N: the first ``acct-2000``, ``acct-2001`` ... landing
    there (the partition of an account is its id's hash: shared/keys.py)."""
    found: dict[int, str] = {}
    for number in range(2000, 2000 + 100 * partitions):  # a hash: ~7 tries per partition
        account = f"acct-{number}"
        found.setdefault(partition_of(account, partitions), account)
        if len(found) == partitions:
            break
    return [
        (PER_PARTITION_LOGIN.format(p), found[p], f"demo-p{p}@example.com", "en", f"partition {p}")
        for p in range(partitions)
    ]


def accounts_csv(env: dict[str, str]) -> str:
    rows = [*NAMED, *per_partition(setting(env, "partitions", RedisSettings))]
    return "login,account_id,email,locale\n" + "\n".join(",".join(r[:4]) for r in rows) + "\n"


def banner_lines(env: dict[str, str]) -> list[str]:
    last = setting(env, "partitions", RedisSettings) - 1
    cooldown = setting(env, "cooldown_seconds", PolicySettings)
    burst = setting(env, "ip_limit_burst", PublicLimitSettings)
    per_minute = setting(env, "ip_limit_per_minute", PublicLimitSettings)
    return [
        *(f"  {login:<10} {account:<10} {shows}" for login, account, _, _, shows in NAMED),
        f"  {PER_PARTITION_LOGIN.format(0)} ... {PER_PARTITION_LOGIN.format(last)}: one "
        f"account per partition (demo-pN lands in partition N)",
        f"a repeated reset of one login within {cooldown} s (RESETGATE_COOLDOWN_SECONDS) sends "
        "nothing new (the same 202); the cooldown outlives a restart, another --provider "
        "included: try another login, or wait",
        f"the public endpoint takes {burst} requests at once per client address, then "
        f"{per_minute}/min (RESETGATE_IP_LIMIT_BURST, _PER_MINUTE); beyond: 429 with Retry-After",
    ]
