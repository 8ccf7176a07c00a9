"""Templates are the studio's files: its directory replaces the shipped defaults without
code, a brand gets its From, reset page and files, every variable is documented, and the
environment is sandboxed, autoescaped and strict."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.emails.compose import VARIABLES
from shared.emails.files import DEFAULTS, TemplateError, Templates
from shared.settings import Brand
from tests.templates.helpers import compose, mailer, studio_dir, write

SHIPPED = {"en", "fr", "de", "es", "pt-BR", "it", "ja", "ko", "zh-Hans", "ru", "pl", "tr", "ar"}


def test_the_shipped_defaults_have_every_locale_the_issue_lists() -> None:
    assert set(Templates().locales()) == SHIPPED


def test_each_shipped_locale_is_its_own_translation() -> None:
    subjects = {loc: (DEFAULTS / loc / "subject.txt").read_text() for loc in SHIPPED}
    assert len(set(subjects.values())) == len(SHIPPED)
    texts = {loc: (DEFAULTS / loc / "body.txt").read_text() for loc in SHIPPED}
    assert len(set(texts.values())) == len(SHIPPED)


def test_a_studio_directory_replaces_the_defaults_without_code(tmp_path: Path) -> None:
    root = studio_dir(tmp_path, copy_defaults=False)
    write(
        root,
        "layout.html",
        '<html lang="{{ locale }}"><body>{% block body %}{% endblock %}</body></html>',
    )
    write(root, "en/subject.txt", "Starfall: your reset link\n")
    write(root, "en/body.txt", "Hi! {{ link }} ({{ expires_in_minutes }} min)\n")
    write(
        root,
        "en/body.html",
        '{% extends "layout.html" %}{% block body %}<a href="{{ link }}">'
        "Reset</a> {{ operation_id }}{% endblock %}",
    )
    composed = compose(mailer(templates_dir=str(root)), locale="fr")
    assert composed.message["subject"] == "Starfall: your reset link"
    assert str(composed.message["text"]).startswith("Hi! https://game.example/reset-password?")
    assert "<a href=" in str(composed.message["html"])
    assert composed.revision.startswith("default/en@")


def test_a_brand_gets_its_from_its_reset_page_and_its_name(tmp_path: Path) -> None:
    brands = {
        "starfall": Brand(
            name="Starfall",
            email_from="Starfall <no-reply@starfall.example>",
            reset_url_base="https://starfall.example/reset",
        )
    }
    m = mailer(brands=brands)
    branded = compose(m, locale="de", brand="starfall").message
    assert branded["from"] == "Starfall <no-reply@starfall.example>"
    assert "https://starfall.example/reset?operation=op-1-TEMPLATES&token=tok-1" in str(
        branded["text"]
    )
    assert "Starfall" in str(branded["subject"])
    plain = compose(m, locale="de", brand="unknown-game").message
    assert plain["from"] == "Account Recovery <no-reply@game.example>"
    assert "https://game.example/reset-password?" in str(plain["text"])
    assert "Game Example" in str(plain["subject"])


def test_a_brand_with_only_a_from_keeps_the_default_reset_page() -> None:
    m = mailer(brands={"moon": Brand(name="Moon", email_from="moon@moon.example")})
    message = compose(m, brand="moon").message
    assert message["from"] == "moon@moon.example"
    assert "https://game.example/reset-password?" in str(message["text"])


def test_a_brand_folder_overrides_only_the_files_it_has(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(
        root,
        "brands/starfall/layout.html",
        (root / "layout.html").read_text().replace("#2563eb", "#7c3aed"),
    )
    write(root, "brands/starfall/fr/subject.txt", "Starfall : nouveau mot de passe\n")
    m = mailer(templates_dir=str(root))
    french = compose(m, locale="fr", brand="starfall")
    assert french.message["subject"] == "Starfall : nouveau mot de passe"
    assert "#7c3aed" in str(french.message["html"]) and "Référence" in str(french.message["text"])
    japanese = compose(m, locale="ja", brand="starfall")
    assert "#7c3aed" in str(japanese.message["html"]) and "パスワード" in str(
        japanese.message["subject"]
    )
    assert french.revision.startswith("starfall/fr@")
    assert compose(m, locale="fr").revision.startswith("default/fr@")
    assert "#7c3aed" not in str(compose(m, locale="fr").message["html"])


def test_the_revision_changes_with_any_file_used_and_only_then(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    before = compose(mailer(templates_dir=str(root)), locale="it").revision
    write(root, "de/subject.txt", "Etwas anderes\n")
    assert compose(mailer(templates_dir=str(root)), locale="it").revision == before
    write(root, "layout.html", (root / "layout.html").read_text() + "<!-- v2 -->\n")
    after = compose(mailer(templates_dir=str(root)), locale="it").revision
    assert after != before and after.startswith("default/it@")


def test_the_variables_are_the_documented_few_and_the_token_only_in_the_link() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "templates.md").read_text()
    assert all(f"`{name}`" in doc for name in VARIABLES)
    composed = compose(mailer(), token="SECRET-TOKEN-1")
    assert "SECRET-TOKEN-1" not in str(composed.message["subject"])
    for part in ("text", "html"):
        assert str(composed.message[part]).count("SECRET-TOKEN-1") == 1


def test_html_is_autoescaped_and_text_is_not() -> None:
    m = mailer(brands={"b": Brand(name="<Tom & Jerry>")})
    message = compose(m, brand="b").message
    assert "&lt;Tom &amp; Jerry&gt;" in str(message["html"])
    assert "<Tom & Jerry>" in str(message["subject"]) + str(message["text"])


def test_an_undefined_name_is_an_error_naming_the_file(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(root, "en/body.txt", "{{ link }} {{ player_name }}\n")
    with pytest.raises(TemplateError, match=r"en/body.txt: 'player_name' is undefined"):
        compose(mailer(templates_dir=str(root)))


def test_a_template_cannot_reach_python(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(root, "en/body.txt", "{{ link }} {{ link.__class__.__mro__ }}\n")
    with pytest.raises(TemplateError, match="unsafe"):
        compose(mailer(templates_dir=str(root)))


def test_a_directory_without_the_default_locale_is_refused(tmp_path: Path) -> None:
    root = studio_dir(tmp_path, copy_defaults=False)
    write(root, "fr/subject.txt", "x\n")
    with pytest.raises(TemplateError, match="default locale 'en'"):
        mailer(templates_dir=str(root))
