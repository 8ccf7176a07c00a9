"""Small inline SVG charts a person reads at a glance: bars for counts per minute, a line
for a share against its limit. Plain SVG elements with classes (console.css colours them):
no script, no style attribute (the CSP allows neither), nothing downloaded."""

from __future__ import annotations

from collections.abc import Sequence

from services.admission.console.html import Markup, escape, join

STEP = 4  # px per value
HEIGHT = 40


def _svg(count: int, label: str, parts: list[Markup]) -> Markup:
    width = count * STEP
    return Markup(
        f'<svg class="spark" viewBox="0 0 {width} {HEIGHT}" width="{width}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<line class="base" x1="0" y1="{HEIGHT - 0.5}" x2="{width}" y2="{HEIGHT - 0.5}"/>'
        f"{join(parts, '')}</svg>"
    )


def _gaps(values: Sequence[object]) -> list[Markup]:
    """A faint mark under each value nobody sampled: no data, not zero."""
    return [
        Markup(f'<rect class="gap" x="{i * STEP}" y="{HEIGHT - 3}" width="{STEP - 1}" height="3"/>')
        for i, v in enumerate(values)
        if v is None
    ]


def bars(values: Sequence[int | None], label: str, kind: str) -> Markup:
    """A bar per value, scaled to the largest; ``kind`` names its colour class."""
    top = max((v for v in values if v), default=0)
    parts = _gaps(values)
    for i, v in enumerate(values):
        if v:
            h = max(1.0, round(v / top * (HEIGHT - 2), 1))
            parts.append(
                Markup(
                    f'<rect class="{escape(kind)}" x="{i * STEP}" y="{HEIGHT - h}" '
                    f'width="{STEP - 1}" height="{h}"/>'
                )
            )
    return _svg(len(values), label, parts)


def against_limit(values: Sequence[float | None], label: str, kind: str) -> Markup:
    """A line of shares (1.0: the limit), with the limit drawn dashed; broken where a
    value is missing. The scale reaches the limit, or the largest value past it."""
    top = max([1.0, *(v for v in values if v is not None)])

    def y(v: float) -> float:
        return round(HEIGHT - 1 - v / top * (HEIGHT - 4), 1)

    parts = _gaps(values)
    limit = y(1.0)
    parts.append(
        Markup(f'<line class="limit" x1="0" y1="{limit}" x2="{len(values) * STEP}" y2="{limit}"/>')
    )
    run: list[str] = []
    for i, v in enumerate([*values, None]):
        if v is not None:
            run.append(f"{i * STEP + 1},{y(v)}")
            continue
        if len(run) == 1:  # one value alone: a dot, a line needs two
            x, at = run[0].split(",")
            parts.append(Markup(f'<circle class="{escape(kind)}" cx="{x}" cy="{at}" r="1.5"/>'))
        elif run:
            parts.append(Markup(f'<polyline class="{escape(kind)}" points="{" ".join(run)}"/>'))
        run = []
    return _svg(len(values), label, parts)
