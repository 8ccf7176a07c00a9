"""Every template rendered with sample values before a service may send: the first
problem found is one line naming the file (``resetgate templates check`` prints them all).

Limits, from the providers' documentation:
- subject: Postmark takes at most 2,000 UTF-16 code units
  (https://postmarkapp.com/support/article/subject-line-and-from-address-character-limits),
  the smallest of the four; one line (a line break would end the header).
- HTML part: the smallest message size any provider's documentation declares (each kind's
  ``Capabilities``; Postmark's 10 MB, https://postmarkapp.com/developer/api/email-api).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from html import escape

from shared.emails.compose import Mailer, reset_link, templates_for
from shared.emails.files import Choice, TemplateError
from shared.from_address import FromError, settings_problems
from shared.providers.registry import KINDS
from shared.settings import EmailSettings

SUBJECT_MAX_UTF16 = 2000
HTML_MAX_BYTES = min(k.max_message_bytes for k in KINDS.values() if k.vendor)
SAMPLE_OPERATION = "op-0-01SAMPLE0000000000000000"
SAMPLE_TOKEN = "SAMPLEtoken0123456789abcdef"  # noqa: S105  # not a secret: no key signs it
_HOUR_MS = 3_600_000


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def problems(subject: str, text: str, html: str, link: str) -> list[tuple[str, str]]:
    """(part, what is wrong with it) for one rendering; empty when nothing is."""
    found = []
    if not subject:
        found.append(("subject.txt", "renders empty"))
    if "\n" in subject or "\r" in subject:
        found.append(("subject.txt", "the subject must be one line"))
    if utf16_length(subject) > SUBJECT_MAX_UTF16:
        found.append(
            ("subject.txt", f"longer than {SUBJECT_MAX_UTF16} characters (Postmark's limit)")
        )
    if SAMPLE_TOKEN in subject:
        found.append(("subject.txt", "the link (and its token) belongs in the body only"))
    for part, body, shown in (("body.txt", text, link), ("body.html", html, escape(link))):
        count = body.count(shown)
        if count != 1 or body.count(SAMPLE_TOKEN) != count:
            found.append((part, f"the link must appear exactly once (found {count})"))
    if len(html.encode()) > HTML_MAX_BYTES:
        found.append(("body.html", f"larger than {HTML_MAX_BYTES} bytes"))
    return found


def _choices(mailer: Mailer) -> Iterator[tuple[str, Choice]]:
    brands = sorted({"", *mailer.settings.brands, *mailer.templates.brands})
    for brand in brands:
        for locale in mailer.templates.locales(brand):
            yield brand, mailer.templates.choose(brand, locale)


def check(mailer: Mailer) -> list[str]:
    """One line per problem, each naming the file (or the locale folder) it is in, or the
    setting of a From that cannot be read."""
    found = settings_problems(mailer.settings)
    for brand_key, choice in _choices(mailer):
        brand = mailer.brand(brand_key)
        link = reset_link(brand.reset_url_base, SAMPLE_OPERATION, SAMPLE_TOKEN)
        values = mailer.variables(brand, choice.locale, link, SAMPLE_OPERATION, _HOUR_MS, 0)
        try:
            rendered = mailer.templates.render(choice, values)
        except TemplateError as error:
            found.append(str(error))
            continue
        found += [
            f"{mailer.templates.path(choice, part)}: {problem}"
            for part, problem in problems(rendered.subject, rendered.text, rendered.html, link)
        ]
    return found


def load(settings: EmailSettings) -> Mailer:
    """The templates and brands, checked; raises TemplateError naming the first problem
    (a From that cannot be read: FromError naming its setting)."""
    froms = settings_problems(settings)
    if froms:
        raise FromError(froms[0])
    mailer = Mailer(settings, templates_for(settings))
    found = check(mailer)
    if found:
        raise TemplateError(found[0])
    return mailer


def load_or_exit(settings: EmailSettings) -> Mailer:
    """:func:`load`, or stop the process with one line naming the file and the error."""
    try:
        return load(settings)
    except FromError as error:
        print(f"invalid configuration: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except TemplateError as error:
        print(f"invalid templates: {error}", file=sys.stderr)
        raise SystemExit(2) from None
