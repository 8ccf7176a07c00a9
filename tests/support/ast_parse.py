"""``ast.parse`` with the garbage collector held off, on CPython 3.11 before 3.11.8.

Those releases keep the AST constructor's recursion depth in state the whole interpreter
shares (python/cpython#106905, fixed in 3.11.8). The constructor runs no Python code of its
own, except when one of its allocations starts a collection: the finalizers a collection
runs are Python code, and one that formats a traceback (an asyncio task whose exception
nobody retrieved, an unclosed session's warning) parses again, since 3.11 places its caret
lines with ``ast.parse``. The nested parse resets the shared depth and the outer one raises
``SystemError: AST constructor recursion depth mismatch`` for a tree it built correctly. When
the outer one is pytest formatting a failure, that is an INTERNALERROR, which ends a
pytest-xdist session: every test after it unrun, and the one failure's report lost.

Reproduced on 3.11.7 (a test failing while garbage with such finalizers waits for the next
collection): an INTERNALERROR with ``--tb=auto``, ``--tb=short`` and ``--assert=plain``
alike; with ``--tb=native`` the SystemError comes from another parse (the next module's
assertion rewriting); with the collector held off during each parse, none in any style.
Nothing is caught or retried: every error a parse raises is raised as before.
"""

from __future__ import annotations

import ast
import gc
import sys
from typing import Any

FIXED_IN = (3, 11, 8)


def parse_without_collecting(*args: Any, **kwargs: Any) -> Any:
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(*args, **kwargs)
    finally:
        if enabled:
            gc.enable()


_parse = ast.parse


def install() -> None:
    """On the releases that have the race (once per process)."""
    if (3, 11) <= sys.version_info[:3] < FIXED_IN and ast.parse is _parse:
        ast.parse = parse_without_collecting  # type: ignore[assignment]
