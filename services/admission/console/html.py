"""A small template approach: ``$name`` placeholders in ``templates/*.html``, every value
escaped unless it is :class:`Markup` (built here from escaped parts). No template engine, no
build step; a page cannot print a value unescaped by forgetting to ask for escaping."""

from __future__ import annotations

import html
import string
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from shared.clock import to_seconds

_TEMPLATES = Path(__file__).parent / "templates"


class Markup(str):
    """Text that is already safe HTML (a rendered template or an escaped value)."""

    __slots__ = ()


def escape(value: object) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[Markup], separator: str = "\n") -> Markup:
    return Markup(separator.join(escape(p) for p in parts))


@cache
def _template(name: str) -> string.Template:
    return string.Template((_TEMPLATES / f"{name}.html").read_text(encoding="utf-8"))


def render(name: str, **values: object) -> Markup:
    """``templates/<name>.html`` with each ``$value`` escaped (Markup is kept as is)."""
    return Markup(_template(name).substitute({k: escape(v) for k, v in values.items()}))


def cell(value: object) -> Markup:
    return Markup(f"<td>{escape(value)}</td>")


def row(*values: object) -> Markup:
    return Markup("<tr>" + "".join(cell(v) for v in values) + "</tr>")


def table(columns: Iterable[str], rows: Iterable[Markup], caption: object = None) -> Markup:
    """A table with a header row of ``columns`` (scope=col) and the given body rows."""
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in columns)
    title = f"<caption>{escape(caption)}</caption>" if caption is not None else ""
    return Markup(
        f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{join(rows)}</tbody></table>"
    )


def section(key: str, title: str, *parts: object) -> Markup:
    """A part of a page under its own ``<h2>``, which labels it (id ``<key>-h``)."""
    return Markup(
        f'<section aria-labelledby="{key}-h">\n<h2 id="{key}-h">{escape(title)}</h2>\n'
        f"{join(escape(p) for p in parts)}\n</section>"
    )


def scrolled(key: str, body: Markup) -> Markup:
    """A wide table that scrolls on its own: a region the keyboard reaches, labelled by the
    heading of its section ``key``."""
    return Markup(
        f'<div class="scroll" tabindex="0" role="region" aria-labelledby="{key}-h">\n{body}\n</div>'
    )


def link(href: str, text: object) -> Markup:
    return Markup(f'<a href="{escape(href)}">{escape(text)}</a>')


def when(ms: int | None) -> Markup:
    """A time as UTC text in a <time> element; '-' when there is none."""
    if not ms:
        return Markup("-")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(to_seconds(ms)))
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(to_seconds(ms)))
    return Markup(f'<time datetime="{iso}">{stamp} UTC</time>')


def seconds(value: float | None) -> str:
    """A duration for a person: 42 s, 7 min 3 s, 2 h 5 min."""
    if value is None:
        return "-"
    total = round(value)
    sign, total = ("-" if total < 0 else ""), abs(total)
    if total < 60:
        return f"{sign}{total} s"
    if total < 3600:
        return f"{sign}{total // 60} min {total % 60} s"
    return f"{sign}{total // 3600} h {total % 3600 // 60} min"


def relative(ms: int | None, now_ms: int) -> Markup:
    """A time and how far from now it is: "… (in 12 s)" / "… (3 min 2 s ago)"."""
    if not ms:
        return Markup("-")
    delta = to_seconds(ms - now_ms)
    words = f"in {seconds(delta)}" if delta >= 0 else f"{seconds(-delta)} ago"
    return Markup(f"{when(ms)} ({escape(words)})")
