"""The reset email. The token goes into the link here and nowhere else: not the store,
not a log, not a metric."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlencode

from shared.directory import Account

TEMPLATE_REVISION = "v1"

_SUBJECT = {"en": "Reset your password", "fr": "Réinitialisez votre mot de passe"}
_TEXT = {
    "en": "Someone asked to reset the password of your account.\n\n"
    "Open this link to choose a new one (it works once, and expires):\n{link}\n\n"
    "If it was not you, ignore this email. Reference: {operation_id}\n",
    "fr": "Quelqu'un a demandé la réinitialisation du mot de passe de votre compte.\n\n"
    "Ouvrez ce lien pour en choisir un nouveau (il ne sert qu'une fois et expire) :\n"
    "{link}\n\nSi ce n'était pas vous, ignorez ce message. Référence : {operation_id}\n",
}


# The HTML part, per locale: every word of it in the reader's language.
_HTML = {
    "en": '<p>{subject}</p><p><a href="{link}">{link}</a></p><p>Reference: {operation_id}</p>',
    "fr": '<p>{subject}</p><p><a href="{link}">{link}</a></p><p>Référence : {operation_id}</p>',
}


def reset_link(base_url: str, operation_id: str, token: str) -> str:
    separator = "&" if "?" in base_url else "?"
    return base_url + separator + urlencode({"operation": operation_id, "token": token})


def render(
    account: Account, *, operation_id: str, token: str, base_url: str, sender: str
) -> dict[str, Any]:
    locale = account.locale if account.locale in _SUBJECT else "en"
    link = reset_link(base_url, operation_id, token)
    text = _TEXT[locale].format(link=link, operation_id=operation_id)
    html = _HTML[locale].format(
        subject=_SUBJECT[locale], link=escape(link, quote=True), operation_id=operation_id
    )
    return {
        "from": sender,
        "to": [account.email],
        "subject": _SUBJECT[locale],
        "text": text,
        "html": html,
        "tags": {"operation_id": operation_id, "template": TEMPLATE_REVISION},
    }
