"""The embedded redis-server (`resetgate up`, and every test's Redis) is the one it started,
and the pre-start port check refuses only a port something listens on.

Parallel test workers draw ports from one range. When two drew the same port, the loser's
redis-server exited on the bind while the winner's answered its PING, and two workers shared
one Redis: their flushes and writes failed each other's tests (17 at once in one run).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from services.ctl.embedded import RedisServer, answering_pid, bindable, free_port

TIME_WAIT = "06"  # /proc/net/tcp's code for the state


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


def time_wait_on(port: int) -> None:
    """Leave a connection in TIME_WAIT on ``port``'s side, as a server that closed its
    keep-alive connections at Ctrl-C does, and stop listening."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    client = socket.create_connection(("127.0.0.1", port), timeout=2)
    accepted, _ = listener.accept()
    accepted.close()  # the server's side closes first: TIME_WAIT is on its port
    client.recv(1)
    client.close()
    listener.close()


def states_on(port: int) -> set[str]:
    """TCP states of the sockets whose local port is ``port`` (/proc/net/tcp)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return {row.split()[3] for row in rows if int(row.split()[1].split(":")[1], 16) == port}


def test_a_port_held_only_by_time_wait_is_free_for_a_restart() -> None:
    port = free_port()
    time_wait_on(port)
    assert TIME_WAIT in states_on(port), "the test must leave a TIME_WAIT"
    assert bindable(port), "a restart right after Ctrl-C would be refused"
    with socket.socket() as holder:  # a listener still makes it busy
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert not bindable(port)
