"""One account's reset email: the brand's From and link, the negotiated locale, the
rendered parts (or a provider-hosted template and its data) and the revision to record.

The token goes into the link here and nowhere else: not the store, not a log, not a
metric, not a template variable of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from shared.clock import to_datetime
from shared.directory import Account
from shared.emails import locales
from shared.emails.files import Templates
from shared.from_address import parse as parse_from
from shared.providers.registry import KINDS
from shared.settings import EmailSettings

# The variables every template gets, local or provider-hosted (docs/templates.md).
VARIABLES = (
    "link",
    "operation_id",
    "expires_at",
    "expires_in_minutes",
    "brand",
    "locale",
    "direction",
)


@dataclass(frozen=True, slots=True)
class BrandView:
    key: str  # "" = the default
    name: str
    email_from: str
    reset_url_base: str


@dataclass(frozen=True, slots=True)
class Hosted:
    """A template the provider keeps: ``name`` may hold ``{locale}`` and ``{brand}``."""

    kind: str
    name: str
    locales: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Composed:
    message: dict[str, Any]
    revision: str


def hosted_problem(kind: str, name: str, variable: str) -> str:
    """Why a provider-hosted template setting cannot work ("" when it can): checked at
    start, since a bad placeholder would otherwise fail every send."""
    hosting = sorted(k.name for k in KINDS.values() if k.hosts_templates)  # each kind's entry
    if kind not in hosting:
        hosts = ", ".join(hosting)
        return f"{variable}: provider kind {kind} hosts no templates ({hosts} do)"
    try:
        name.format(locale="en", brand="default")
    except (KeyError, IndexError, ValueError):
        return f"{variable}: only {{locale}} and {{brand}} may appear in braces"
    return ""


def reset_link(base_url: str, operation_id: str, token: str) -> str:
    separator = "&" if "?" in base_url else "?"
    return base_url + separator + urlencode({"operation": operation_id, "token": token})


def expiry(expires_at_ms: int, now_ms: int) -> tuple[str, int]:
    """(``2026-12-01 20:30 UTC``, the minutes left to the nearest, at least 1). Rounded down,
    a 60-minute link sent a few milliseconds after it was made said "59 minutes" where the
    preview said 60; to the nearest, the figure is off by under 30 s either way, and the
    exact time stands beside it."""
    at = to_datetime(expires_at_ms).strftime("%Y-%m-%d %H:%M UTC")
    return at, max(1, (expires_at_ms - now_ms + 30_000) // 60_000)


def templates_for(settings: EmailSettings) -> Templates:
    root = Path(settings.templates_dir) if settings.templates_dir else None
    return Templates(root, settings.default_locale)


class Mailer:
    def __init__(self, settings: EmailSettings, templates: Templates) -> None:
        self.settings = settings
        self.templates = templates

    def brand(self, key: str) -> BrandView:
        """The brand's name, From and reset page, each falling back to the default's."""
        found = self.settings.brands.get(key)
        if found is None:
            return BrandView(
                "", self.settings.brand_name, self.settings.email_from, self.settings.reset_url_base
            )
        return BrandView(
            key,
            found.name,
            found.email_from or self.settings.email_from,
            found.reset_url_base or self.settings.reset_url_base,
        )

    def variables(
        self,
        brand: BrandView,
        locale: str,
        link: str,
        operation_id: str,
        expires_at_ms: int,
        now_ms: int,
    ) -> dict[str, Any]:
        at, minutes = expiry(expires_at_ms, now_ms)
        values = (link, operation_id, at, minutes, brand.name, locale, locales.direction(locale))
        return dict(zip(VARIABLES, values, strict=True))

    def compose(
        self,
        account: Account,
        *,
        operation_id: str,
        token: str,
        expires_at_ms: int,
        now_ms: int,
        hosted: Hosted | None = None,
    ) -> Composed:
        brand = self.brand(account.brand)
        link = reset_link(brand.reset_url_base, operation_id, token)
        # Parsed once per From (cached) and checked at start: quoted where RFC 5322 needs it.
        head = {"from": parse_from(brand.email_from).header, "to": [account.email]}
        if hosted is not None:
            locale = locales.negotiate(account.locale, hosted.locales, hosted.locales[0])
            name = hosted.name.format(locale=locale, brand=brand.key or "default")
            data = self.variables(brand, locale, link, operation_id, expires_at_ms, now_ms)
            revision = f"{hosted.kind}:{name}"
            return Composed(
                {
                    **head,
                    "template": {"name": name, "data": data},
                    "tags": _tags(operation_id, revision),
                },
                revision,
            )
        # A brand folder in the templates is used even before RESETGATE_BRANDS names it.
        choice = self.templates.choose(account.brand, account.locale)
        data = self.variables(brand, choice.locale, link, operation_id, expires_at_ms, now_ms)
        rendered = self.templates.render(choice, data)
        return Composed(
            {
                **head,
                "subject": rendered.subject,
                "text": rendered.text,
                "html": rendered.html,
                "tags": _tags(operation_id, rendered.revision),
            },
            rendered.revision,
        )


def _tags(operation_id: str, revision: str) -> dict[str, str]:
    return {"operation_id": operation_id, "template": revision}
