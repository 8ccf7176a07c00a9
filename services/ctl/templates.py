"""``resetgate templates``: check the reset email's templates and preview what a player gets.

Reads the same settings the sender does (RESETGATE_TEMPLATES_DIR, RESETGATE_BRANDS,
RESETGATE_DEFAULT_LOCALE, RESETGATE_EMAIL_FROM, RESETGATE_RESET_URL_BASE), so a check that
passes here passes at the sender's start. Needs no Redis and no provider.
"""

from __future__ import annotations

import argparse
import sys

from services.ctl import stack
from shared import clock
from shared.emails import check
from shared.emails.compose import Mailer, reset_link, templates_for
from shared.emails.files import TemplateError
from shared.settings import EmailSettings, load


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    templates = subparsers.add_parser("templates", help="check and preview the reset email")
    sub = templates.add_subparsers(dest="templates_command", required=True)
    sub.add_parser("check", help="render every locale and brand; list every problem").set_defaults(
        handler=check_command
    )
    preview = sub.add_parser("preview", help="print the email a player would get")
    preview.add_argument("--locale", default="", help="the player's BCP 47 tag (e.g. ja, fr-CA)")
    preview.add_argument("--brand", default="", help="the directory's brand for the player")
    preview.add_argument("--html", action="store_true", help="print the HTML part, not the text")
    preview.set_defaults(handler=preview_command)


def check_command(args: argparse.Namespace) -> int:
    del args
    stack.settings_of_running_stack()  # the templates folder `resetgate up` was given
    settings = load(EmailSettings)
    try:
        mailer = Mailer(settings, templates_for(settings))
    except TemplateError as error:
        print(f"invalid templates: {error}", file=sys.stderr)
        return 1
    found = check.check(mailer)
    for problem in found:
        print(f"invalid templates: {problem}", file=sys.stderr)
    if found:
        return 1
    root = mailer.templates.root
    brands = ", ".join(sorted({*settings.brands, *mailer.templates.brands})) or "none"
    print(f"templates ok: {root} ({len(mailer.templates.locales())} locales; brands: {brands})")
    return 0


def preview_command(args: argparse.Namespace) -> int:
    stack.settings_of_running_stack()  # the link opens the local reset page while one runs
    settings = load(EmailSettings)
    try:
        mailer = check.load(settings)
    except TemplateError as error:
        print(f"invalid templates: {error}", file=sys.stderr)
        return 1
    brand = mailer.brand(args.brand)
    choice = mailer.templates.choose(args.brand, args.locale or settings.default_locale)
    link = reset_link(brand.reset_url_base, check.SAMPLE_OPERATION, check.SAMPLE_TOKEN)
    now = clock.now_ms()
    values = mailer.variables(
        brand, choice.locale, link, check.SAMPLE_OPERATION, now + 3_600_000, now
    )
    rendered = mailer.templates.render(choice, values)
    if args.html:
        print(rendered.html, end="")
        return 0
    print(
        f"From: {brand.email_from}\nSubject: {rendered.subject}\n"
        f"X-Template-Revision: {rendered.revision}\n\n{rendered.text}",
        end="",
    )
    return 0
