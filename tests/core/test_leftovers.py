"""A killed test session's processes and directories are reaped by the next session of the
same checkout, and nothing else is (tests/support/leftovers.py), on real processes: a
redis-server working in a dead session's directory, processes marked by a dead session, a
live session's and another checkout's alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from services.ctl.embedded import RedisServer
from tests.support import leftovers

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def owner_of(process: subprocess.Popen[bytes]) -> str:
    return f"{process.pid}-{leftovers.start_time(process.pid)}"


def mark(checkout: Path, owner: str) -> str:
    return f"{checkout} {owner.replace('-', ' ', 1)}"


def sleeper(marked: str | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop(leftovers.ENV, None)
    if marked is not None:
        env[leftovers.ENV] = marked
    return subprocess.Popen(SLEEP, env=env)


def test_a_dead_sessions_processes_and_directory_go_and_nothing_else(tmp_path: Path) -> None:
    checkout, other, tmp = tmp_path / "checkout", tmp_path / "other-checkout", tmp_path / "tmp"
    gone = sleeper()  # a session's pytest, killed
    dead = owner_of(gone)
    gone.kill()
    gone.wait()
    live = f"{os.getpid()}-{leftovers.start_time(os.getpid())}"
    home = leftovers.base(checkout, str(tmp))
    (home / dead).mkdir(parents=True)
    (home / live).mkdir()
    redis_dead = RedisServer(directory=str(home / dead)).start()
    redis_live = RedisServer(directory=str(home / live)).start()
    marked_dead = sleeper(mark(checkout, dead))
    marked_live = sleeper(mark(checkout, live))
    elsewhere = sleeper(mark(other, dead))  # another checkout's session by the same numbers
    unmarked = sleeper()
    survivors = [redis_live.process, marked_live, elsewhere, unmarked]
    try:
        reaped = leftovers.reap(checkout, str(tmp))
        assert redis_dead.process is not None
        for killed in (redis_dead.process, marked_dead):
            assert killed.wait(timeout=10) == -9
        assert sorted(reaped.killed) == sorted([redis_dead.process.pid, marked_dead.pid])
        assert reaped.removed == [home / dead] and not (home / dead).exists()
        assert (home / live).is_dir()
        assert all(p is not None and p.poll() is None for p in survivors)
        assert leftovers.reap(checkout, str(tmp)).killed == []  # nothing dead is left
    finally:
        for process in (*survivors, marked_dead):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        redis_live.process = redis_dead.process = None


def test_this_session_runs_in_a_directory_of_its_own() -> None:
    """Whatever this session starts writes its temporary files where the next session of
    this checkout looks for leftovers, and carries its mark."""
    checkout, pid, start = os.environ[leftovers.ENV].rsplit(" ", 2)
    assert Path(checkout) == leftovers.ROOT
    assert leftovers.alive(f"{pid}-{start}")
    tmp = Path(os.environ["TMPDIR"])
    assert tmp.name == f"{pid}-{start}" and tmp.is_dir()
    assert tmp.parent.name == leftovers.base(leftovers.ROOT, "/").name
