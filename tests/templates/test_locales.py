"""Locale negotiation: the directory's locale is a BCP 47 tag; the player gets the closest
locale the templates have, else the default, and never an error."""

from __future__ import annotations

import pytest

from shared.emails.locales import direction, negotiate
from tests.templates.helpers import compose, mailer

SHIPPED = ("en", "fr", "de", "es", "pt-BR", "it", "ja", "ko", "zh-Hans", "ru", "pl", "tr", "ar")


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("fr-CA", "fr"),
        ("pt-BR", "pt-BR"),
        ("zz", "en"),
        ("not a tag!", "en"),
        ("", "en"),
        ("en--US", "en"),
        ("x" * 80, "en"),
        ("pt-PT", "pt-BR"),
        ("PT_br", "pt-BR"),
        ("zh-CN", "zh-Hans"),
        ("ja-JP", "ja"),
        ("ar-EG", "ar"),
    ],
)
def test_a_tag_gets_the_closest_locale_or_the_default(tag: str, expected: str) -> None:
    assert negotiate(tag, SHIPPED, "en") == expected


def test_the_configured_default_is_the_fallback() -> None:
    assert negotiate("zz", SHIPPED, "de") == "de"


@pytest.mark.parametrize(
    ("tag", "subject"),
    [
        ("fr-CA", "Réinitialisez votre mot de passe"),
        ("pt-BR", "Redefina a senha"),
        ("zz", "Reset your"),
        ("@@ malformed", "Reset your"),
        ("ja", "パスワード再設定"),
    ],
)
def test_each_tag_gets_the_right_template(tag: str, subject: str) -> None:
    message = compose(mailer(), locale=tag).message
    assert str(message["subject"]).startswith(subject) or subject in str(message["subject"])


def test_a_malformed_tag_with_another_default_gets_that_default() -> None:
    message = compose(mailer(default_locale="de"), locale="??").message
    assert "Passwort" in str(message["subject"])


def test_arabic_is_right_to_left_and_the_others_are_not() -> None:
    assert direction("ar") == "rtl" and direction("he-IL") == "rtl"
    assert direction("fr") == "ltr" and direction("ja") == "ltr"
    html = str(compose(mailer(), locale="ar").message["html"])
    assert '<html lang="ar" dir="rtl">' in html
    assert 'dir="ltr"' not in html
