"""Issue 15 item 9: each locale's email is in that language, the HTML part included."""

from __future__ import annotations

import re

from services.sender.template import render
from shared.directory import Account


def email(locale: str) -> dict[str, object]:
    account = Account("acct-t", "t@example.com", locale)
    return render(account, operation_id="op-1-X", token="tok",
                  base_url="http://127.0.0.1:1/reset-password", sender="a@example.com")  # fmt: skip


def test_the_french_email_is_french_in_both_parts() -> None:
    fr = email("fr")
    assert "Référence" in str(fr["html"]) and "Référence" in str(fr["text"])
    assert "Reference" not in str(fr["html"]) + str(fr["text"])
    assert "Réinitialisez" in str(fr["html"])


def test_the_link_is_the_same_in_both_parts_and_escaped_in_html() -> None:
    en = email("en")
    link = re.search(r"http://\S+", str(en["text"]))
    assert link is not None
    assert link.group(0).replace("&", "&amp;") in str(en["html"])
    assert "Reference: op-1-X" in str(en["html"])
