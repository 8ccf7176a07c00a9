"""The From of reset emails, read once as RFC 5322 and handed to each provider in its shape.

Studios write ``Studio Inc. <no-reply@studio.example>``: RFC 5322 only allows the ``.`` there
as an obsolete phrase, and Postmark refuses punctuation in an unquoted display name with
ErrorCode 300 (postmarkapp.com/support/article/1180-what-does-errorcode-300-mean: "the name
field needs to be quote escaped"). So a From is parsed with ``email.headerregistry`` and
re-written quoted where needed. What cannot be read one way only is refused at start with one
line naming the setting: ``Studio, Inc. <…>`` is two addresses to RFC 5322 (an unquoted comma
separates them), the first of them no address at all.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from email.errors import InvalidHeaderDefect
from email.headerregistry import Address, HeaderRegistry
from email.utils import formataddr

from shared.settings import EmailSettings

_REGISTRY = HeaderRegistry()
EXAMPLE = '"Studio, Inc." <no-reply@studio.example>'


class FromError(ValueError):
    """What is wrong with a From and how to write it (without the From itself)."""


@dataclass(frozen=True, slots=True)
class FromAddress:
    name: str  # the display name, unquoted ("" when none)
    email: str

    @property
    def domain(self) -> str:
        return self.email.rpartition("@")[2].lower()

    @property
    def header(self) -> str:
        """RFC 5322, the name quoted where it must be (Postmark's and Mailgun's ``From``)."""
        return _header(self.name, self.email)

    @property
    def encoded(self) -> str:
        """ASCII only, a non-ASCII name as an RFC 2047 encoded word (SES
        ``FromEmailAddress``: docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html)."""
        return formataddr((self.name, self.email), charset="utf-8")


@functools.lru_cache(maxsize=256)
def _header(name: str, email: str) -> str:
    """Written once per From: every email's composing asks (headerregistry's Address costs
    more than the rest of the message's head)."""
    return str(Address(display_name=name, addr_spec=email))


@functools.lru_cache(maxsize=256)
def parse(text: str) -> FromAddress:
    """``text`` as one mailbox; raises FromError saying what to write instead."""
    if "\r" in text or "\n" in text:
        raise FromError("must be one line")
    try:
        header = _REGISTRY("From", text)
        addresses = header.addresses  # type: ignore[attr-defined]  # an AddressHeader
    except (IndexError, ValueError, TypeError):
        raise FromError(f"is not an address; write it as {EXAMPLE}") from None
    if len(addresses) > 1:
        raise FromError(
            f"reads as {len(addresses)} addresses (an unquoted comma separates them); quote "
            f"the display name: {EXAMPLE}"
        )
    invalid = any(isinstance(d, InvalidHeaderDefect) for d in header.defects)
    if not addresses or invalid or not addresses[0].username or "." not in addresses[0].domain:
        raise FromError(f"is not an address; write it as {EXAMPLE}")
    found = addresses[0]
    return FromAddress(found.display_name, found.addr_spec)


def settings_problems(settings: EmailSettings) -> list[str]:
    """One line per From that cannot be read (RESETGATE_EMAIL_FROM, each brand's), each
    naming its setting."""
    found = []
    for where, text in configured(settings):
        try:
            parse(text)
        except FromError as error:
            found.append(f"{where}: the From {error}")
    return found


def configured(settings: EmailSettings) -> list[tuple[str, str]]:
    """(the setting that names it, the From) for the default From and every brand's own."""
    froms = [("RESETGATE_EMAIL_FROM", settings.email_from)]
    froms += [
        (f"RESETGATE_BRANDS (brand {key!r} email_from)", brand.email_from)
        for key, brand in sorted(settings.brands.items())
        if brand.email_from
    ]
    return froms


def domains(settings: EmailSettings) -> list[tuple[str, str]]:
    """(setting, domain) of every From that parses, each domain once."""
    seen: dict[str, str] = {}
    for where, text in configured(settings):
        try:
            seen.setdefault(parse(text).domain, where)
        except FromError:
            continue
    return [(where, domain) for domain, where in seen.items()]
