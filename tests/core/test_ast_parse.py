"""A collection inside ``ast.parse`` whose finalizers parse again (tests/support/ast_parse.py):
on CPython 3.11.7 without the fix every parse here raises SystemError, and pytest's report
of a failing test dies the same way, as an INTERNALERROR."""

from __future__ import annotations

import ast
import gc
import traceback
from pathlib import Path


def test_a_parse_whose_collection_formats_tracebacks_builds_its_tree() -> None:
    left = [200]

    class Unretrieved:
        """As an asyncio task whose exception nobody retrieved: its finalizer formats a
        traceback (on 3.11 that parses the caret lines), and leaves such garbage again."""

        def __del__(self) -> None:
            try:
                {}["missing"]
            except KeyError as error:
                "".join(traceback.format_exception(error))
            if left[0] > 0:
                left[0] -= 1
                again = Unretrieved()
                again.__dict__["cycle"] = again  # freed only by a collection

    source = Path(__file__).read_text() * 20
    thresholds = gc.get_threshold()
    gc.set_threshold(20)  # a collection every few allocations: some inside each parse
    try:
        first = Unretrieved()
        first.__dict__["cycle"] = first
        del first
        for _ in range(10):
            assert isinstance(ast.parse(source), ast.Module)
    finally:
        left[0] = 0
        gc.set_threshold(*thresholds)
        gc.collect()
