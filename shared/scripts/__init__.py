"""Lua scripts, one per file, each with a typed async wrapper.

A script is sent by SHA (computed up front); on NOSCRIPT it is loaded and the call retried,
which also covers a Redis restart or a failover to a replica without the script cache.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

from shared.delivery import DEFINITIVE_RANK, PRECEDENCE
from shared.model import (
    LEDGER_FIELDS,
    LIVE,
    QUARANTINABLE,
    RELEASABLE,
    TERMINAL,
    TRANSITIONS,
    State,
    on_token_consumed,
)
from shared.redis import RedisClient


def ledger_prelude() -> str:
    """What a script that reads or writes ledger rows gets in place of ``-- @ledger``:
    the row positions from shared/model.py and the row codec (array, nulls for defaults)."""
    positions = ", ".join(f"{name}={i}" for i, name in enumerate(LEDGER_FIELDS, 1))
    return f"""-- ledger rows (rendered from shared/model.py LEDGER_FIELDS)
local LEDGER = {{{positions}}}
local function ledger_decode(raw)
  local row = cjson.decode(raw)
  if row[1] ~= nil then return row end
  local compact = {{}}  -- a row written as a JSON object, before the compact encoding
  for name, i in pairs(LEDGER) do compact[i] = row[name] end
  return compact
end
local function ledger_encode(row)
  local last = 0
  for i = 1, {len(LEDGER_FIELDS)} do
    local v = row[i]
    if v == nil or v == cjson.null or v == "" or v == 0 then row[i] = cjson.null else last = i end
  end
  for i = last + 1, {len(LEDGER_FIELDS)} do row[i] = nil end
  return cjson.encode(row)
end
"""


def _lua_set(states: frozenset[State]) -> str:
    return "{" + ", ".join(f"{state}=true" for state in sorted(states)) + "}"


def states_prelude() -> str:
    """What a script that reads or writes an operation's state gets in place of
    ``-- @states``: the state sets of shared/model.py, so no script restates one."""
    consumed = ", ".join(
        f'{state}="{goal}"' for state in sorted(State) if (goal := on_token_consumed(state))
    )
    table = ", ".join(f"{state}={_lua_set(TRANSITIONS[state])}" for state in sorted(State))
    return f"""-- operation states (rendered from shared/model.py)
local TRANSITIONS = {{{table}}}
local LIVE = {_lua_set(LIVE)}
local TERMINAL = {_lua_set(TERMINAL)}
local QUARANTINABLE = {_lua_set(QUARANTINABLE)}
local RELEASABLE = {_lua_set(RELEASABLE)}
local ON_TOKEN_CONSUMED = {{{consumed}}}
"""


def delivery_prelude() -> str:
    """What a script that ranks delivery events gets in place of ``-- @delivery``: the
    precedence of shared/delivery.py, and the rank from which an event ends the wait."""
    ranks = ", ".join(f"{kind}={rank}" for kind, rank in PRECEDENCE.items())
    return f"""-- delivery precedence (rendered from shared/delivery.py)
local RANK = {{{ranks}}}
local DEFINITIVE = {DEFINITIVE_RANK}
"""


# A line "-- @<name>" in a script is replaced, at load time, by what these render.
PRELUDES = {"-- @ledger\n": ledger_prelude, "-- @states\n": states_prelude,
            "-- @delivery\n": delivery_prelude}  # fmt: skip


def render(source: str) -> str:
    for marker, prelude in PRELUDES.items():
        if marker in source:
            source = source.replace(marker, prelude())
    return source


class Script:
    def __init__(self, name: str) -> None:
        self.name = name
        source = resources.files(__package__).joinpath(f"{name}.lua").read_text()
        self.source = render(source)
        self.sha = hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(
        self, client: RedisClient, keys: list[str], args: list[str | int | float]
    ) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)
