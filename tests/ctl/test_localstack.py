"""``resetgate up``'s view of the sandbox, held to the sandbox itself."""

from __future__ import annotations

from services.ctl import localstack
from services.sandbox.dialects import DIALECTS


def test_the_cli_knows_which_sandbox_modes_push_events() -> None:
    pushing = {mode for mode, dialect in DIALECTS.items() if dialect.hook is not None}
    assert pushing == localstack.PUSHING_MODES
    assert not localstack.pushes_events("http")  # no dialect: the feed only
