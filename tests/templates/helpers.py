"""A studio's templates directory built per test, and a Mailer over it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from shared.directory import Account
from shared.emails.compose import Composed, Mailer, templates_for
from shared.emails.files import DEFAULTS
from shared.settings import EmailSettings

HOUR_MS = 3_600_000


def studio_dir(tmp_path: Path, copy_defaults: bool = True) -> Path:
    root = tmp_path / "templates"
    if copy_defaults:
        shutil.copytree(DEFAULTS, root)
    else:
        root.mkdir()
    return root


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def mailer(**settings: Any) -> Mailer:
    values = EmailSettings(**settings)
    return Mailer(values, templates_for(values))


def compose(
    m: Mailer, locale: str = "en", brand: str = "", token: str = "tok-1", now_ms: int = 0
) -> Composed:
    account = Account("acct-1", "p@example.com", locale, brand)
    return m.compose(
        account,
        operation_id="op-1-TEMPLATES",
        token=token,
        expires_at_ms=now_ms + HOUR_MS,
        now_ms=now_ms,
    )
