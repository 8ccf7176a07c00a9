"""Messages kept across a restart (``messages_file``): ``resetgate up`` sets it, so after
Ctrl-C and ``make run`` again the sandbox still lists every email it received (and answers
a replayed idempotency key as it did before the restart).

Only the messages are kept (bodies, answers, the events they had): the event feed starts
over, as after any restart of the sandbox (a poller's cursor beyond the new feed's end is
told so, ``Store.beyond_end``). The file holds what the sandbox shows on
``/_sandbox/messages``, reset links included, so it is its owner's only (0600), and the
chart never sets it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from services.sandbox.logs import log
from services.sandbox.state import Sandbox
from services.sandbox.store import Event, Message


def _dump(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "idempotency_key": message.idempotency_key,
        "operation_id": message.operation_id,
        "created_at": message.created_at,
        "fingerprint": message.fingerprint,
        "body": message.body,
        "response": base64.b64encode(message.response).decode(),
        "events": [[e.event_id, e.type, e.occurred_at] for e in message.events],
    }


def _load(raw: dict[str, Any], now: float, now_mono: float) -> Message:
    created_at = float(raw["created_at"])
    message = Message(
        id=str(raw["id"]),
        idempotency_key=raw["idempotency_key"],
        operation_id=raw["operation_id"],
        created_at=created_at,
        created_mono=now_mono - max(0.0, now - created_at),  # its age, on this clock
        fingerprint=int(raw["fingerprint"]),
        body=raw["body"],
        response=base64.b64decode(raw["response"]),
    )
    message.events = [Event(str(i), message.id, str(t), float(at)) for i, t, at in raw["events"]]
    return message


def save(sandbox: Sandbox, path: Path) -> int:
    """Write every message to ``path`` (owner-only, replaced whole); returns the count."""
    messages = [_dump(m) for m in sandbox.store.messages.values()]
    partial = path.with_name(path.name + ".partial")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(orjson.dumps(messages))
    partial.replace(path)
    return len(messages)


def restore(sandbox: Sandbox, path: Path) -> int:
    """Record the messages ``path`` holds (none if it is absent); returns the count."""
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return 0
    now, now_mono = time.time(), time.monotonic()
    for item in raw:
        sandbox.store.record(_load(item, now, now_mono))
    return len(raw)


def keep(sandbox: Sandbox, path: Path) -> Callable[[web.Application], AsyncIterator[None]]:
    """An aiohttp cleanup context: restore at start, save at a graceful stop."""

    async def context(_: web.Application) -> AsyncIterator[None]:
        try:
            log("sandbox.messages_restored", messages=restore(sandbox, path))
        except (OSError, ValueError, KeyError, TypeError) as error:
            # An unreadable file must not keep the provider down: start empty, say so.
            log("sandbox.messages_not_restored", error=type(error).__name__)
        yield
        log("sandbox.messages_saved", messages=save(sandbox, path))

    return context
