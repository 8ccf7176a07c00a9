"""The embedded redis-server (`resetgate up`, and every test's Redis) is the one it started.

Parallel test workers draw ports from one range. When two drew the same port, the loser's
redis-server exited on the bind while the winner's answered its PING, and two workers shared
one Redis: their flushes and writes failed each other's tests (17 at once in one run).
"""

from __future__ import annotations

import pytest

from services.ctl.embedded import RedisServer, answering_pid


def test_a_drawn_port_another_server_took_is_drawn_again() -> None:
    first = RedisServer().start()
    second = RedisServer()
    second.port = first.port  # what the race did: the same draw, the other server bound first
    try:
        second.start()
        assert second.port != first.port
        assert second.process is not None and answering_pid(second.port) == second.process.pid
        assert first.process is not None and answering_pid(first.port) == first.process.pid
    finally:
        second.stop()
        first.stop()


def test_a_given_port_another_server_holds_is_an_error_not_a_shared_redis() -> None:
    first = RedisServer().start()
    try:
        with pytest.raises(RuntimeError, match=f"port {first.port} is taken by another"):
            RedisServer(first.port).start()
    finally:
        first.stop()
