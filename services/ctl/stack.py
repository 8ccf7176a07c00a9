"""Which Redis a ``resetgate`` command talks to, and saying so.

``resetgate up`` writes ``<dir>/env`` (default ``.run/env``) while the stack runs: the
embedded Redis' URL, the internal API token and the admission URL, as ``export`` lines a
shell can source. Every command that reads or writes state resolves its Redis the same
way, and prints the answer first (on stderr, so ``--json`` output stays clean):

1. ``RESETGATE_REDIS_SENTINELS`` (the primary they name) or ``RESETGATE_REDIS_URL`` when
   set (production, a tunnel, tests);
2. else the ``env`` file of a running ``resetgate up``: ``$RESETGATE_RUN_DIR``, else
   ``.run/`` in this directory or a parent, else in the checkout this command runs from;
3. else nothing: the command refuses with one line saying how to choose. A believable
   all-zero table read from whatever Redis happens to listen on 127.0.0.1:6379 is worse than
   no answer (set ``RESETGATE_REDIS_URL=redis://127.0.0.1:6379/0`` to mean that one).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from redis.exceptions import RedisClusterException

from shared.redis import TRANSIENT_ERRORS, RedisClient, create_client, describe
from shared.settings import CommonSettings

ENV_FILE = "env"
RUN_DIR = ".run"
PID_VARIABLE = "RESETGATE_UP_PID"
# The names in the env file that `resetgate up` made (not given to it): a shell that sourced
# the file and runs `resetgate up` again must not hand the old run's values to the new one.
DERIVED_VARIABLE = "RESETGATE_UP_DERIVED"
# The checkout an editable install runs from: `.venv/bin/resetgate` finds `make run`'s stack
# from any directory.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class StackError(SystemExit):
    """An expected failure: one line, no traceback, exit status 1."""

    def __init__(self, message: str) -> None:
        super().__init__(f"error: {message}")


def write_env(path: Path, values: dict[str, str]) -> Path:
    """``export NAME=value`` lines, readable by their owner only (they hold a bearer token)."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in values.items()]
    path.touch(mode=0o600)
    path.write_text("\n".join(lines) + "\n")
    return path


def read_env(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            values[name] = value
    return values


def find_env_file() -> Path | None:
    explicit = os.environ.get("RESETGATE_RUN_DIR")
    if explicit:
        return _existing(Path(explicit) / ENV_FILE)
    here = Path.cwd().resolve()
    for directory in (here, *here.parents, PROJECT_ROOT):
        if found := _existing(directory / RUN_DIR / ENV_FILE):
            return found
    return None


def _existing(path: Path) -> Path | None:
    return path if path.is_file() else None


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def given_settings() -> dict[str, str]:
    """The RESETGATE_* settings this process was given, less what a sourced env file of an
    earlier `resetgate up` put there (those are dropped from the environment)."""
    made = set(os.environ.get(DERIVED_VARIABLE, "").split()) | {PID_VARIABLE, DERIVED_VARIABLE}
    for name in made:
        os.environ.pop(name, None)
    return {k: v for k, v in os.environ.items() if k.startswith("RESETGATE_")}


def check_sourced() -> None:
    """A shell that sourced the env file of a `resetgate up` since restarted: carry on when
    the new run's settings are the ones sourced, else say to source the file again (never
    "cannot reach Redis", which would send the reader looking at a healthy Redis)."""
    sourced = os.environ.get(PID_VARIABLE, "")
    if not sourced or _alive(sourced):
        return
    path = find_env_file()
    current = read_env(path) if path else {}
    running = current.get(PID_VARIABLE, "")
    if path is None or not _alive(running):
        raise StackError(
            f"the `resetgate up` (pid {sourced}) whose {RUN_DIR}/{ENV_FILE} this shell sourced "
            f"has stopped: start the stack again (`make run`), then `. {RUN_DIR}/{ENV_FILE}` again"
        )
    changed = sorted(
        name
        for name, value in current.items()
        if name not in (PID_VARIABLE, DERIVED_VARIABLE) and os.environ.get(name) != value
    )
    if changed:
        raise StackError(
            f"the stack restarted (pid {sourced}, now {running}) with other settings "
            f"({', '.join(changed)}): source {path} again (`. {path}`)"
        )
    os.environ[PID_VARIABLE] = running  # the same stack settings: nothing to redo


def settings_of_running_stack() -> None:
    """What a running `resetgate up` runs with (its templates folder, its reset page), for
    commands that need no Redis: a default where the environment has none; nothing, and
    no refusal, when no stack runs."""
    path = find_env_file()
    values = read_env(path) if path else {}
    if _alive(values.get(PID_VARIABLE, "")):
        for name, value in values.items():
            os.environ.setdefault(name, value)


def use_local_stack() -> str:
    """Fill the environment from the running stack's env file when RESETGATE_REDIS_URL is
    unset; returns where the Redis URL came from, for :func:`announce`."""
    check_sourced()
    if os.environ.get("RESETGATE_REDIS_SENTINELS"):
        return "from RESETGATE_REDIS_SENTINELS"
    if os.environ.get("RESETGATE_REDIS_URL"):
        return "from RESETGATE_REDIS_URL"
    path = find_env_file()
    if path is None:
        raise StackError(
            "no Redis to talk to: RESETGATE_REDIS_URL is unset and no `make run` stack is "
            f"running (no {RUN_DIR}/{ENV_FILE} here, in a parent or in {PROJECT_ROOT}): start "
            "one with `make run`, or set RESETGATE_REDIS_URL (redis://127.0.0.1:6379/0 for "
            "this machine's own Redis)"
        )
    values = read_env(path)
    pid = values.get(PID_VARIABLE, "")
    if not _alive(pid):
        raise StackError(
            f"{path} belongs to a `resetgate up` (pid {pid or '?'}) that is no longer "
            "running: start it again with `make run`, or set RESETGATE_REDIS_URL"
        )
    for name, value in values.items():
        os.environ.setdefault(name, value)
    return f"from {path}, written by `resetgate up` (pid {pid})"


def announce(settings: CommonSettings, source: str) -> None:
    kind = " (cluster)" if settings.redis_cluster else ""
    print(f"redis: {describe(settings)}{kind}, {source}", file=sys.stderr)


def with_redis(
    settings: CommonSettings, source: str, work: Callable[[RedisClient], Awaitable[T]]
) -> T:
    """Announce the Redis, run ``work`` with a client, turn an unreachable Redis into one
    line naming it."""
    announce(settings, source)

    async def main() -> T:
        client = create_client(settings)
        try:
            return await work(client)
        finally:
            await client.aclose()

    try:
        return asyncio.run(main())
    except (RedisClusterException, *TRANSIENT_ERRORS) as error:
        reason = str(error) or type(error).__name__
        raise StackError(
            f"cannot reach Redis at {describe(settings)} ({source}): {reason}"
        ) from None
