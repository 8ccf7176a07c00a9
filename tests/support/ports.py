"""Ports for tests that need an address nothing answers on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refused_url() -> Iterator[str]:
    """An http URL on loopback where every connection is refused while the block lasts.

    The port is held bound and never listens: a port from ``free_port()`` left unbound can
    be taken meanwhile by another server (another worker's, another engineer's), which then
    answers the requests meant to fail."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"
