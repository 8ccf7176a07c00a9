"""Each locale's email is in that language, the HTML part included, and the link (the only
place the token goes) is the same in both parts."""

from __future__ import annotations

import re

from shared.directory import Account
from shared.emails.compose import Mailer, expiry, templates_for
from shared.settings import EmailSettings

HOUR_MS = 3_600_000


def email(locale: str, **settings: object) -> dict[str, object]:
    mailer = Mailer(EmailSettings(**settings), templates_for(EmailSettings(**settings)))  # type: ignore[arg-type]
    account = Account("acct-t", "t@example.com", locale)
    return mailer.compose(
        account, operation_id="op-1-X", token="tok", expires_at_ms=HOUR_MS, now_ms=0
    ).message


def test_the_french_email_is_french_in_both_parts() -> None:
    fr = email("fr")
    assert "Référence" in str(fr["html"]) and "Référence" in str(fr["text"])
    assert "Reference" not in str(fr["html"]) + str(fr["text"])
    assert "Réinitialisez" in str(fr["subject"]) and "Réinitialisez" in str(fr["html"])


def test_the_link_is_the_same_in_both_parts_and_escaped_in_html() -> None:
    en = email("en", reset_url_base="http://127.0.0.1:1/reset-password")
    link = re.search(r"http://\S+", str(en["text"]))
    assert link is not None and "token=tok" in link.group(0)
    assert link.group(0).replace("&", "&amp;") in str(en["html"])
    assert "op-1-X" in str(en["html"])
    assert "tok" not in str(en["subject"])


def test_the_expiry_is_shown_as_a_time_and_as_minutes() -> None:
    en = email("en")
    assert "60 minutes (1970-01-01 01:00 UTC)" in str(en["text"])


def test_a_link_sent_moments_after_it_was_made_says_the_minutes_the_preview_says() -> None:
    """The email said 59 minutes where the preview said 60: the send comes a few ms after
    the token. The opposite harm, a figure far above what is left, stays under 30 s."""
    hour = 3_600_000
    assert expiry(hour, 0)[1] == 60
    assert expiry(hour + 5_000, 5_250)[1] == 60, "sent 250 ms after the token was made"
    assert expiry(hour, 31_000)[1] == 59, "59:29 left: 59, not 60"
    assert expiry(89_000, 0)[1] == 1 and expiry(91_000, 0)[1] == 2
    assert expiry(10_000, 0)[1] == 1, "never 0 minutes while the link works"
