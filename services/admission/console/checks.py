"""The providers page's failing preflight checks (shared.preflight.store.read: what the
senders last asked each provider, `resetgate providers check`)."""

from __future__ import annotations

from services.admission.console.html import Markup, row, table, when
from shared.preflight.store import Checked


def failing_checks(checked: dict[str, Checked]) -> Markup:
    """A table of the failing checks with what to do, or nothing when none fails."""
    rows = [
        row(c.provider, c.check, c.detail, when(found.checked_at))
        for found in checked.values()
        for c in found.failing
    ]
    if not rows:
        return Markup("")
    caption = "Failing provider checks (warning ProviderMisconfigured): what a send would hit"
    return table(("Provider", "Check", "What to do", "Checked"), rows, caption)
