"""Checked before it can hurt: every template renders with sample values, the link is
there exactly once, no name is undefined, the subject and the HTML fit the providers'
limits; the sender refuses to start with one line naming the file, and `resetgate
templates check` prints every problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.emails.check import SUBJECT_MAX_UTF16, check, load
from shared.emails.files import TemplateError
from tests.conftest import TEST_TOKEN_KEYS
from tests.templates.helpers import mailer, studio_dir, write

ONCE = "the link must appear exactly once "
LINK_TWICE = (
    '{% extends "layout.html" %}{% block action %}Go{% endblock %}'
    '{% block ignore %}<a href="{{ link }}">again</a>{% endblock %}'
)


def problems_with(tmp_path: Path, name: str, text: str) -> list[str]:
    root = studio_dir(tmp_path)
    write(root, name, text)
    return check(mailer(templates_dir=str(root)))


def test_the_shipped_defaults_pass() -> None:
    assert check(mailer()) == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("fr/body.txt", "Pas de lien ici.\n", "fr/body.txt: " + ONCE + "(found 0)"),
        ("de/body.txt", "{{ link }}\n{{ link }}\n", "de/body.txt: " + ONCE + "(found 2)"),
        ("ja/body.html", LINK_TWICE, "ja/body.html: " + ONCE + "(found 2)"),
        (
            "ko/subject.txt",
            "{{ link }}\n",
            "ko/subject.txt: the link (and its token) belongs in the body only",
        ),
        (
            "es/subject.txt",
            "Línea uno\nLínea dos\n",
            "es/subject.txt: the subject must be one line",
        ),
        (
            "it/subject.txt",
            "x" * (SUBJECT_MAX_UTF16 + 1),
            "it/subject.txt: longer than 2000 characters",
        ),
        ("pl/subject.txt", "   \n", "pl/subject.txt: renders empty"),
        ("tr/body.txt", "{{ link }} {{ player }}\n", "tr/body.txt: 'player' is undefined"),
        ("ru/body.html", "{% block x %}\n{{ link }\n", "ru/body.html:2: unexpected '}'"),
    ],
)
def test_each_problem_is_one_line_naming_the_file(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    found = problems_with(tmp_path, name, text)
    assert len(found) == 1, found
    assert expected in found[0]
    assert str(tmp_path) in found[0]


def test_a_subject_over_the_limit_counts_utf16_code_units(tmp_path: Path) -> None:
    # An emoji is two UTF-16 code units, as Postmark counts them.
    assert problems_with(tmp_path / "a", "en/subject.txt", "😀" * 1000) == []
    assert problems_with(tmp_path / "b", "en/subject.txt", "😀" * 1001)


def test_a_brand_is_checked_with_its_own_reset_page(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(root, "brands/moon/en/body.txt", "{{ link }}{{ link }}\n")
    found = check(mailer(templates_dir=str(root)))
    assert len(found) == 1 and "brands/moon/en/body.txt" in found[0]


def test_load_raises_the_first_problem(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(root, "fr/body.txt", "no link\n")
    with pytest.raises(TemplateError, match=r"fr/body\.txt"):
        load(mailer(templates_dir=str(root)).settings)


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RESETGATE_")}
    return subprocess.run(
        [sys.executable, *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_a_broken_template_stops_the_sender_at_start_with_one_line(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(
        root,
        "fr/body.html",
        '{% extends "layout.html" %}{% block intro %}{{ player }}{% endblock %}',
    )
    env = {
        "RESETGATE_TEMPLATES_DIR": str(root),
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_PROVIDER_API_KEY": "k",
        "RESETGATE_REDIS_URL": "redis://127.0.0.1:1/0",
    }
    done = _run(["-m", "services.sender"], env)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0] == f"invalid templates: {root}/fr/body.html: 'player' is undefined"


def test_templates_check_lists_every_problem_and_fails(tmp_path: Path) -> None:
    root = studio_dir(tmp_path)
    write(root, "fr/body.txt", "no link\n")
    write(root, "de/subject.txt", "{{ nope }}\n")
    done = _run(
        ["-m", "services.ctl.main", "templates", "check"], {"RESETGATE_TEMPLATES_DIR": str(root)}
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert any("de/subject.txt: 'nope' is undefined" in line for line in lines)
    assert any("fr/body.txt: the link must appear exactly once" in line for line in lines)
    ok = _run(["-m", "services.ctl.main", "templates", "check"], {})
    assert ok.returncode == 0 and ok.stdout.startswith("templates ok:"), ok.stderr


def test_templates_preview_prints_what_a_player_gets() -> None:
    env = {
        "RESETGATE_BRANDS": '{"starfall": {"name": "Starfall", "email_from": '
        '"Starfall <no-reply@starfall.example>", "reset_url_base": '
        '"https://starfall.example/reset"}}'
    }
    text = _run(
        [
            "-m",
            "services.ctl.main",
            "templates",
            "preview",
            "--locale",
            "ja",
            "--brand",
            "starfall",
        ],
        env,
    )
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(
        "From: Starfall <no-reply@starfall.example>\nSubject: Starfall のパスワード再設定\n"
    )
    assert "https://starfall.example/reset?operation=" in text.stdout
    html = _run(["-m", "services.ctl.main", "templates", "preview", "--locale", "ar", "--html"], {})
    assert html.returncode == 0 and '<html lang="ar" dir="rtl">' in html.stdout


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {
                "RESETGATE_PROVIDER_KIND": "postmark",
                "RESETGATE_PROVIDER_URL": "http://127.0.0.1:1",
                "RESETGATE_PROVIDER_TEMPLATE": "reset-{lang}",
            },
            "invalid configuration: RESETGATE_PROVIDER_TEMPLATE: only {locale} and {brand} may "
            "appear in braces",
        ),
        (
            {"RESETGATE_PROVIDER_TEMPLATE": "reset"},
            "invalid configuration: RESETGATE_PROVIDER_TEMPLATE: provider kind http hosts no "
            "templates (mailgun, postmark, sendgrid, ses do)",
        ),
        (
            {
                "RESETGATE_PROVIDERS": "primary",
                "RESETGATE_PROVIDER_PRIMARY_KIND": "sendgrid",
                "RESETGATE_PROVIDER_PRIMARY_URL": "http://127.0.0.1:1",
                "RESETGATE_PROVIDER_PRIMARY_API_KEY": "k",
                "RESETGATE_PROVIDER_PRIMARY_TEMPLATE": "{0}",
            },
            "invalid configuration: RESETGATE_PROVIDER_PRIMARY_TEMPLATE: only {locale} and {brand} "
            "may appear in braces",
        ),
    ],
)
def test_a_hosted_template_that_cannot_work_stops_the_sender_with_one_line(
    env: dict[str, str], expected: str
) -> None:
    base = {
        "RESETGATE_TOKEN_KEYS": TEST_TOKEN_KEYS,
        "RESETGATE_PROVIDER_API_KEY": "k",
        "RESETGATE_REDIS_URL": "redis://127.0.0.1:1/0",
    }
    done = _run(["-m", "services.sender"], {**base, **env})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [expected]
