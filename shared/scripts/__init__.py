"""Lua scripts, one per file, each called through a typed request.

Sending is redis-py's: each script is a ``redis.commands.core.AsyncScript`` (EVALSHA, and
on NOSCRIPT a load and one retry; in a pipeline, the missing scripts loaded before the
pipeline runs, never a batch run twice). What this package adds on top:

- **Rendering.** A script's ``-- @<name>`` lines are replaced by tables rendered from the
  Python that owns them (:data:`PRELUDES`: states, ledger rows, names, delivery precedence),
  so no script restates a table.
- **One statement per call.** A script's interface is stated once, by its :class:`Request`
  subclass (in a module of this package, beside the replies it decodes into): a
  keyword-only dataclass whose ``KEYS`` names the script's keys in order, and whose fields,
  in order, are its ARGV. A field typed as a dataclass stands for that dataclass's fields;
  an :func:`unsent` field is not sent (an id the keys are built from, or a whole whose
  :func:`part_of` fields are). Each key is built by its name, from the request's partition
  and ids (:data:`PARTITION_KEYS`: ``operation``, ``ledger``, ``account``,
  ``operations...``; ``send``, ``due``, ... as shared.keys names them); a request whose keys
  are not the partition's overrides :meth:`Request.keys`. The script reads them as named
  Lua locals rendered from the request in place of its ``-- @request`` line. ``decode``
  turns the reply into a typed value (an enum code, a dataclass, a count).
- **Batches on a Cluster**, whose pipelines refuse EVALSHA: concurrent calls instead.

tests/core/test_script_contract.py checks every script against its request, discovering the
requests by importing this package's modules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import operator
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from importlib import resources
from typing import Any, ClassVar, Generic, TypeVar, get_type_hints

from redis.asyncio import RedisCluster
from redis.commands.core import AsyncScript

from shared.delivery import DEFINITIVE_RANK, PRECEDENCE, REMEMBERED_EVENTS
from shared.keys import (
    ACCOUNT_FIELD,
    JOB_FIELD,
    RECENT_KEEP_MS,
    RECENT_MAX,
    RETRY_FIELD,
    SEND_GROUP,
    TRACE_FIELD,
    TRACESTATE_FIELD,
    PartitionKeys,
)
from shared.model import (
    CLOSABLE,
    CLOSED_AS,
    ENTRY_POINT_PREFIX,
    LEDGER_FIELDS,
    LIVE,
    QUARANTINABLE,
    RECENTLY_FAILED,
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
local function ledger_decode(raw) return cjson.decode(raw) end
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
local CLOSABLE = {_lua_set(CLOSABLE)}
local CLOSED_AS = "{CLOSED_AS}"
local ON_TOKEN_CONSUMED = {{{consumed}}}
"""


# Names Python reads or writes too (the send stream's group, job and trace fields, the
# operation hash's entry-point counters): a script never spells them itself.
NAMES = {
    "SEND_GROUP": SEND_GROUP,
    "JOB_FIELD": JOB_FIELD,
    "TRACE_FIELD": TRACE_FIELD,
    "TRACESTATE_FIELD": TRACESTATE_FIELD,
    "RETRY_FIELD": RETRY_FIELD,
    "ACCOUNT_FIELD": ACCOUNT_FIELD,
    "ENTRY_POINT_PREFIX": ENTRY_POINT_PREFIX,
}
# An entry that hands an operation on carries the trace context its admission kept (nothing
# more when it kept none: traces were off), read here from the hash the script has in KEYS.
HANDOFF = """local function handoff(operation, operation_id, retry)
  local trace = redis.call("HMGET", operation, TRACE_FIELD, TRACESTATE_FIELD)
  local entry = {JOB_FIELD, operation_id}
  if not trace[1] then return entry end
  entry[3] = TRACE_FIELD; entry[4] = trace[1]
  if trace[2] then entry[#entry + 1] = TRACESTATE_FIELD; entry[#entry + 1] = trace[2] end
  if retry then entry[#entry + 1] = RETRY_FIELD; entry[#entry + 1] = "1" end
  return entry
end
"""


def names_prelude() -> str:
    """What a script gets in place of ``-- @names``: :data:`NAMES` as Lua locals, and
    ``handoff(operation, operation_id, retry)``: the fields of an entry handing the operation
    on (a send job with ``retry`` when it is not the admission's, a settlement without)."""
    lines = "".join(f'local {name} = "{value}"\n' for name, value in NAMES.items())
    return f"-- names (rendered from shared/keys.py and shared/model.py)\n{lines}{HANDOFF}"


def delivery_prelude() -> str:
    """What a script that ranks delivery events gets in place of ``-- @delivery``: the
    precedence of shared/delivery.py, the rank from which an event ends the wait, and how
    many distinct events an operation remembers for dedupe."""
    ranks = ", ".join(f"{kind}={rank}" for kind, rank in PRECEDENCE.items())
    return f"""-- delivery precedence (rendered from shared/delivery.py)
local RANK = {{{ranks}}}
local DEFINITIVE = {DEFINITIVE_RANK}
local REMEMBERED = {REMEMBERED_EVENTS}
"""


def settle_prelude() -> str:
    """What a script that ends an operation gets in place of ``-- @settle``: ``settle``,
    which keeps the finished operation for ``retention_ms`` (the archive off), or, with the
    archive on (``retention_ms`` 0), keeps it without an expiry and hands its id to the
    archiver's stream (with the operation's trace context, when it kept one); the archiver
    alone gives it one, after its commit (archive.lua)."""
    return """-- settling (rendered from shared/scripts/__init__.py)
local function settle(operation, ledger, settled, operation_id, retention_ms, now)
  if retention_ms > 0 then
    redis.call("PEXPIRE", operation, retention_ms)
    redis.call("PEXPIRE", ledger, retention_ms)
    return
  end
  redis.call("PERSIST", operation)
  redis.call("PERSIST", ledger)
  redis.call("HSET", operation, "settled_at", now)
  redis.call("HDEL", operation, "archived_at")
  redis.call("XADD", settled, "*", unpack(handoff(operation, operation_id, false)))
end
"""


def recent_prelude() -> str:
    """What a script that ends an operation gets in place of ``-- @recent``: which ends are
    indexed as recently failed, and the one function that writes a bounded index (a day of
    entries, at most RECENT_MAX: shared/keys.py)."""
    return f"""-- recent indexes (rendered from shared/model.py and shared/keys.py)
local RECENTLY_FAILED = {_lua_set(RECENTLY_FAILED)}
local function note_recent(index, at, id)
  redis.call("ZADD", index, at, id)
  redis.call("ZREMRANGEBYSCORE", index, "-inf", "(" .. (at - {RECENT_KEEP_MS}))
  redis.call("ZREMRANGEBYRANK", index, 0, -{RECENT_MAX + 1})
end
"""


def due_prelude() -> str:
    """What a script that acts on the members of a schedule whose time has come gets in place
    of ``-- @due``: ``take_due``, which re-checks each candidate the caller read with ZRANGE
    BYSCORE, so a racing writer (which removed it) or a second caller never acts on one twice."""
    return """-- due members (rendered from shared/scripts/__init__.py)
local function take_due(schedule, ids, now)
  local taken = {}
  for i, id in ipairs(ids) do
    local score = redis.call("ZSCORE", schedule, id)
    if score and tonumber(score) <= now then
      redis.call("ZREM", schedule, id)
      taken[#taken + 1] = i
    end
  end
  return taken  -- the positions in ids of those removed from schedule
end
"""


# A line "-- @<name>" in a script is replaced, at load time, by what these render.
PRELUDES = {
    "-- @ledger\n": ledger_prelude,
    "-- @states\n": states_prelude,
    "-- @names\n": names_prelude,
    "-- @delivery\n": delivery_prelude,
    "-- @settle\n": settle_prelude,
    "-- @recent\n": recent_prelude,
    "-- @due\n": due_prelude,
}
REQUEST_MARKER = "-- @request\n"


def render(source: str, request: type[Request[Any]] | None = None) -> str:
    """The script as Redis runs it: every prelude marker replaced, ``-- @request`` by the
    named locals of ``request`` (:func:`request_prelude`)."""
    for marker, prelude in PRELUDES.items():
        if marker in source:
            source = source.replace(marker, prelude())
    if REQUEST_MARKER in source:
        if request is None:
            raise TypeError("a script that reads -- @request is run through its Request")
        source = source.replace(REQUEST_MARKER, request_prelude(request))
    return source


def request_prelude(request: type[Request[Any]]) -> str:
    """What a script gets in place of ``-- @request``: its KEYS and ARGV as named locals,
    in the request's order and of its types (a trailing tuple as a Lua table)."""
    keys, args = request.layout()
    origin = f"{request.__module__}.{request.__qualname__}"
    return f"-- request (rendered from {origin})\n{keys.lua('KEYS')}{args.lua('ARGV')}"


Arg = str | int | float
Call = tuple[list[str], list[Arg]]
_CLUSTER_CONCURRENCY = 64


class Script:
    """One script file, rendered for (and bound to) its :class:`Request` class, sent as
    redis-py's :class:`AsyncScript`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.text = resources.files(__package__).joinpath(f"{name}.lua").read_text()
        self.request: type[Request[Any]] | None = None

    def bind(self, request: type[Request[Any]]) -> None:
        self.request = request
        for rendered in ("source", "sent"):  # @dataclass(slots=True) re-creates the class
            self.__dict__.pop(rendered, None)

    @functools.cached_property
    def source(self) -> str:
        return render(self.text, self.request)

    @functools.cached_property
    def sent(self) -> AsyncScript:
        # Given as bytes, redis-py needs no client to hash it; every call names its client.
        return AsyncScript(None, self.source.encode())  # type: ignore[arg-type]

    def __call__(self, client: RedisClient, keys: list[str], args: list[Arg]) -> Awaitable[Any]:
        return self.sent(keys, args, client)

    async def many(self, client: RedisClient, calls: Sequence[Call]) -> list[Any]:
        """Many calls: one pipelined round trip on a standalone Redis (redis-py loads the
        script first if the server lacks it); on a Cluster, concurrent calls, each routed by
        its keys."""
        if isinstance(client, RedisCluster):
            results: list[Any] = []
            for start in range(0, len(calls), _CLUSTER_CONCURRENCY):
                chunk = calls[start : start + _CLUSTER_CONCURRENCY]
                results += await asyncio.gather(*(self(client, k, a) for k, a in chunk))
            return results
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            await self.sent(keys, args, pipe)  # queued: the pipeline answers itself
        return list(await pipe.execute())


R = TypeVar("R")
_ROLE = "script_role"
_PART_OF = "script_part_of"


def unsent() -> Any:
    """Declares a :class:`Request` field the script is not sent: an id its KEYS are built
    from (an account id, a partition, a provider name), or a whole it sends parts of."""
    return dataclasses.field(metadata={_ROLE: "unsent"})


def part_of(whole: str) -> Any:
    """Declares an ARGV field whose value is the same-named field of the request's field
    ``whole`` (an :func:`unsent` dataclass): its place in ARGV, not a value of its own."""
    return dataclasses.field(init=False, repr=False, compare=False, metadata={_PART_OF: whole})


# The keys a request's KEYS may name, each built from the partition and the request's ids;
# any other property of shared.keys.PartitionKeys (send, due, live, ...) is named as it is.
PARTITION_KEYS: dict[str, Callable[[PartitionKeys, Any], str]] = {
    "operation": lambda pk, request: pk.operation(request.operation_id),
    "ledger": lambda pk, request: pk.attempts(request.operation_id),
    "account": lambda pk, request: pk.account(request.account_id),
}
# A trailing run of keys ("name..." in KEYS), one per id of the request's batch.
PARTITION_RUNS: dict[str, Callable[[PartitionKeys, Any], list[str]]] = {
    "operations": lambda pk, request: [pk.operation(i) for i in request.operation_ids],
}


def _partition_key(name: str) -> Callable[[PartitionKeys, Any], str]:
    if name in PARTITION_KEYS:
        return PARTITION_KEYS[name]
    if name == "tag" or not isinstance(getattr(PartitionKeys, name, None), property):
        raise TypeError(f"{name!r} is not a partition key: the request overrides keys()")
    get = operator.attrgetter(name)
    return lambda pk, request: get(pk)


def _partition_given(request: Any) -> PartitionKeys:
    return PartitionKeys(request.partition)


def _partition_of_operation(request: Any) -> PartitionKeys:
    return PartitionKeys.of(request.operation_id)


def _partition_keys(owner: type[Any], names: tuple[str, ...]) -> Callable[[Any], list[str]]:
    """How ``owner`` builds the keys ``names`` names: in the partition ``partition`` gives,
    else the one its ``operation_id`` carries."""
    fields = {f.name for f in dataclasses.fields(owner)}
    if "partition" in fields:
        partition: Callable[[Any], PartitionKeys] = _partition_given
    elif "operation_id" in fields:
        partition = _partition_of_operation
    else:
        raise TypeError(f"{owner.__name__} has no partition or operation_id: override keys()")
    fixed, run = names, None
    if names and names[-1].endswith("..."):
        fixed, last = names[:-1], names[-1].removesuffix("...")
        if last not in PARTITION_RUNS:
            raise TypeError(f"{last!r} is not a run of partition keys: override keys()")
        run = PARTITION_RUNS[last]
    steps = [_partition_key(name) for name in fixed]

    def build(request: Any) -> list[str]:
        pk = partition(request)
        keys = [step(pk, request) for step in steps]
        if run is not None:
            keys += run(pk, request)
        return keys

    return build


# script name -> its request class (filled as the modules of this package define them)
REQUESTS: dict[str, type[Request[Any]]] = {}

# How a script reads each kind of argument into its local (Redis passes strings); a
# ``tuple[str, ...]`` is a trailing run, read by a loop (_Part.lua).
_VARIADIC = "run"
_LUA_READ = {str: "{}", int: "tonumber({})", float: "tonumber({})", bool: '{} == "1"'}
_LUA_WORDS = frozenset(
    {
        *("and", "break", "do", "else", "elseif", "end", "false", "for"),
        *("function", "goto", "if", "in", "local", "nil", "not", "or"),
        *("repeat", "return", "then", "true", "until", "while"),
    }
)


def _flat(
    owner: type[Any], field: dataclasses.Field[Any], prefix: str = ""
) -> list[tuple[str, Any]]:
    """(attribute path, kind) of one field; a dataclass-typed field stands for its fields,
    a :func:`part_of` field is read from its whole."""
    kind = get_type_hints(owner)[field.name]
    whole = field.metadata.get(_PART_OF)
    path = prefix + (f"{whole}." if whole else "") + field.name
    if kind == tuple[str, ...]:
        return [(path, _VARIADIC)]
    if kind in _LUA_READ:
        return [(path, kind)]
    if not (dataclasses.is_dataclass(kind) and isinstance(kind, type)):
        raise TypeError(f"a script argument is str, int, float, bool, tuple or a dataclass: {kind}")
    return [pair for sub in dataclasses.fields(kind) for pair in _flat(kind, sub, path + ".")]


def _getter(paths: tuple[str, ...]) -> Callable[[object], tuple[Any, ...]]:
    # attrgetter: one C call for every field (admission's hot path builds a request each time);
    # it returns a bare value for one name, and a part always reads as a tuple.
    if len(paths) > 1:
        return operator.attrgetter(*paths)
    if not paths:
        return lambda request: ()
    get = operator.attrgetter(paths[0])
    return lambda request: (get(request),)


@dataclasses.dataclass(frozen=True, slots=True)
class _Part:
    """How one side (KEYS or ARGV) of a request is read: by position, in field order."""

    names: tuple[str, ...]  # the Lua locals, as the script's header lists them
    kinds: tuple[Any, ...]  # a type of _LUA_READ, or _VARIADIC
    bools: tuple[int, ...]  # positions sent as "1" / "0"
    variadic: bool  # the last field is a tuple, spread into KEYS[n..] / ARGV[n..]
    get: Callable[[Any], Any]  # ARGV: the values, as read() sends them; KEYS: the keys built

    @classmethod
    def of(cls, flat: list[tuple[str, Any]], get: Callable[[Any], Any] | None = None) -> _Part:
        """From (attribute path, kind) pairs, read by ``get`` (else by their paths)."""
        paths = tuple(path for path, _ in flat)
        kinds = tuple(kind for _, kind in flat)
        names = tuple(path.rsplit(".", 1)[-1] for path in paths)
        if _VARIADIC in kinds[:-1]:
            raise TypeError("only the last field may be variadic")
        if len(set(names)) < len(names) or _LUA_WORDS & set(names):
            raise TypeError(f"a script's names are distinct and not Lua's words: {names}")
        bools = tuple(i for i, kind in enumerate(kinds) if kind is bool)
        variadic = bool(kinds) and kinds[-1] == _VARIADIC
        return cls(names, kinds, bools, variadic, get or _getter(paths))

    @classmethod
    def keys(cls, owner: type[Request[Any]]) -> _Part:
        """The KEYS that ``owner.KEYS`` names (``name...``: a trailing run), built by name
        from the partition's keys unless ``owner`` builds its own (overrides keys())."""
        flat = [
            (name.removesuffix("..."), _VARIADIC if name.endswith("...") else str)
            for name in owner.KEYS
        ]
        if owner.keys is Request.keys:
            return cls.of(flat, _partition_keys(owner, owner.KEYS))
        return cls.of(flat, owner.keys)

    def read(self, request: object) -> list[Any]:
        values = list(self.get(request))
        for i in self.bools:
            values[i] = "1" if values[i] else "0"
        if self.variadic:
            values[-1:] = values[-1]
        return values

    def lua(self, table: str) -> str:
        """The Lua that reads this part of ``table`` (KEYS or ARGV) into named locals; a
        variadic run by a loop (unpack would hit the C stack limit on a large batch)."""
        fixed = len(self.names) - self.variadic
        reads = [
            _LUA_READ[kind].format(f"{table}[{i}]") for i, kind in enumerate(self.kinds[:fixed], 1)
        ]
        lines = [f"local {', '.join(self.names[:fixed])} = {', '.join(reads)}\n"] if fixed else []
        if self.variadic:
            run = self.names[-1]
            lines.append(f"local {run} = {{}}\n")
            lines.append(f"for i = {fixed + 1}, #{table} do {run}[i - {fixed}] = {table}[i] end\n")
        return "".join(lines)


_LAYOUTS: dict[type[Any], tuple[_Part, _Part]] = {}  # computed once per request class


class Request(Generic[R]):
    """One call of one script: a keyword-only dataclass (slots; not frozen, which would
    double its construction cost on admission's hot path) that names its keys in ``KEYS``."""

    __slots__ = ()
    SCRIPT: ClassVar[Script]
    # The script's keys by name, in order (see the module's docstring).
    KEYS: ClassVar[tuple[str, ...]] = ()
    # The enum of the codes the script replies with first ({"ok", ...}), when it has one.
    CODES: ClassVar[type[StrEnum] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        REQUESTS[cls.SCRIPT.name] = cls  # @dataclass(slots=True) re-creates it: the last wins
        cls.SCRIPT.bind(cls)

    @classmethod
    def layout(cls) -> tuple[_Part, _Part]:
        """The KEYS and the ARGV, in the order the script takes them."""
        layout = _LAYOUTS.get(cls)
        if layout is None:
            fields = dataclasses.fields(cls)  # type: ignore[arg-type]
            sent = [f for f in fields if f.metadata.get(_ROLE) != "unsent"]
            args = _Part.of([pair for f in sent for pair in _flat(cls, f)])
            layout = _LAYOUTS[cls] = (_Part.keys(cls), args)
        return layout

    def keys(self) -> list[str]:
        """The script's KEYS, built by the names in ``KEYS`` from the partition's keys
        (:data:`PARTITION_KEYS`). A request with other keys overrides this."""
        return self.layout()[0].get(self)  # type: ignore[no-any-return]

    def call(self) -> Call:
        """(KEYS, ARGV) as the script's header lists them."""
        keys, args = self.layout()
        return keys.get(self), args.read(self)

    def decode(self, raw: Any) -> R:
        raise NotImplementedError

    async def run(self, client: RedisClient) -> R:
        keys, args = self.call()
        return self.decode(await self.SCRIPT(client, keys, args))
