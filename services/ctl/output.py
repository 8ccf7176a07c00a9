"""How every ``resetgate ops`` view prints: a table for people, ``--json`` for scripts.

What is printed comes from the store, and some of it from outside (a provider's message id,
an operator's reason): control and format characters are shown escaped, never written to
the terminal, so a stored value can neither drive it (an escape sequence clearing the
screen, retitling the window, hiding text) nor forge a line of its own (a newline).
"""

from __future__ import annotations

import argparse
import re
import unicodedata
from typing import Any

from shared import codec

_SHOWN_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp"})
# What JSON leaves raw though a terminal acts on it: DEL, the C1 controls (CSI is U+009B),
# the bidi and zero-width format characters, the line and paragraph separators.
_JSON_RAW_CONTROLS = re.compile("[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def printable(text: str) -> str:
    """``text`` with every control, format or line-separator character as its escape."""
    if text.isprintable():
        return text
    return "".join(
        char.encode("unicode_escape").decode()
        if unicodedata.category(char) in _SHOWN_ESCAPED
        else char
        for char in text
    )


def json_printable(document: str) -> str:
    return _JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def print_view(args: argparse.Namespace, value: Any, lines: list[str]) -> None:
    if getattr(args, "json", False):
        print(json_printable(codec.dumps_str(value)))
    else:
        print("\n".join(printable(line) for line in lines))
