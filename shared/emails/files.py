"""The templates directory: one folder per locale, an optional overlay per brand.

    <dir>/layout.html              the HTML frame every locale's body.html extends
    <dir>/<locale>/subject.txt     one line
    <dir>/<locale>/body.txt        the plain-text part
    <dir>/<locale>/body.html       the HTML part
    <dir>/brands/<brand>/...       the same names: any file here replaces the default's
                                   for that brand (a layout with its logo and footer,
                                   or one locale's wording)

Rendered with Jinja2 in a sandboxed environment (a template cannot reach Python), HTML
autoescaped (``.html`` files), and an undefined name an error rather than an empty string.
Everything is read once, when the process starts: the chart rolls the pods when the files
change, so the revision a ledger row names is the content that was sent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

from shared.emails import locales

DEFAULTS = Path(__file__).parent / "defaults"
PARTS = ("subject.txt", "body.txt", "body.html")
BRANDS = "brands"
_NAME = re.compile(r"^[a-z0-9_-]{1,32}$")
_CHOSEN_MAX = 4096  # players' (brand, locale tag) pairs remembered


class TemplateError(ValueError):
    """A template that cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class Rendered:
    subject: str
    text: str
    html: str
    revision: str  # "<brand>/<locale>@<sha256 of every file used, 12 hex>"


@dataclass(frozen=True, slots=True)
class Choice:
    brand: str  # "" = the default templates
    locale: str


def _environment(loader: jinja2.BaseLoader) -> SandboxedEnvironment:
    return SandboxedEnvironment(
        loader=loader,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        auto_reload=False,
    )


class Templates:
    """Every locale and brand found under ``root`` (the shipped defaults when None)."""

    def __init__(self, root: Path | None = None, default_locale: str = "en") -> None:
        self.root = (root or DEFAULTS).resolve()
        if not self.root.is_dir():
            raise TemplateError(f"{self.root}: not a directory")
        self.default_locale = default_locale
        self.brands = sorted(
            p.name for p in (self.root / BRANDS).glob("*") if p.is_dir() and _NAME.match(p.name)
        )
        self._envs = {brand: _environment(self._loader(brand)) for brand in ["", *self.brands]}
        self._locales = {brand: self._find_locales(brand) for brand in self._envs}
        if default_locale not in self._locales[""]:
            raise TemplateError(
                f"{self.root / default_locale}: the default locale {default_locale!r} needs "
                f"{', '.join(PARTS)}"
            )
        self._revisions: dict[Choice, str] = {}
        self._compiled: dict[tuple[Choice, str], jinja2.Template] = {}
        # (brand, locale tag) -> the choice: the files never change, so neither does it
        self._chosen: dict[tuple[str, str], Choice] = {}

    def _loader(self, brand: str) -> jinja2.BaseLoader:
        base = jinja2.FileSystemLoader(self.root)
        if not brand:
            return base
        return jinja2.ChoiceLoader([jinja2.FileSystemLoader(self.root / BRANDS / brand), base])

    def _find_locales(self, brand: str) -> list[str]:
        folders = [self.root] + ([self.root / BRANDS / brand] if brand else [])
        names = {p.parent.name for f in folders for p in f.glob("*/subject.txt")}
        return sorted(
            n
            for n in names
            if n != BRANDS
            and locales.valid_tag(n)
            and all(self._source(brand, f"{n}/{part}") for part in PARTS)
        )

    def _source(self, brand: str, name: str) -> Path | None:
        for folder in ([self.root / BRANDS / brand] if brand else []) + [self.root]:
            path = folder / name
            if path.is_file():
                return path
        return None

    def locales(self, brand: str = "") -> list[str]:
        return list(self._locales[brand if brand in self._envs else ""])

    def choose(self, brand: str, locale_tag: str) -> Choice:
        """The templates a player of ``brand`` with ``locale_tag`` gets (both fall back)."""
        found = self._chosen.get((brand, locale_tag))
        if found is None:
            if len(self._chosen) >= _CHOSEN_MAX:  # tags come from the directory: bounded
                self._chosen.clear()
            found = self._chosen[brand, locale_tag] = self._choose(brand, locale_tag)
        return found

    def _choose(self, brand: str, locale_tag: str) -> Choice:
        brand = brand if brand in self._envs else ""
        locale = locales.negotiate(locale_tag, self._locales[brand], self.default_locale)
        return Choice(brand, locale)

    def path(self, choice: Choice, part: str) -> Path:
        found = self._source(choice.brand, f"{choice.locale}/{part}")
        assert found is not None, "choose() only returns locales that have every part"
        return found

    def render(self, choice: Choice, variables: Mapping[str, object]) -> Rendered:
        parts = []
        for part in PARTS:
            try:
                parts.append(self._template(choice, part).render(variables))
            except jinja2.TemplateError as error:
                raise TemplateError(self._describe(choice, part, error)) from None
        subject = parts[0].strip()
        return Rendered(subject, parts[1], parts[2], self.revision(choice))

    def _template(self, choice: Choice, part: str) -> jinja2.Template:
        """The compiled part, looked up once (the files are read once: nothing reloads)."""
        found = self._compiled.get((choice, part))
        if found is None:
            env = self._envs[choice.brand]
            found = self._compiled[choice, part] = env.get_template(f"{choice.locale}/{part}")
            # Jinja keeps a template's globals as a ChainMap over the environment's, which
            # every render copies into its context key by key in Python (a tenth of the
            # render); the environment's globals never change here, so one flat copy renders
            # the same at C speed.
            found.globals = dict(found.globals)
        return found

    def _describe(self, choice: Choice, part: str, error: jinja2.TemplateError) -> str:
        where = self.path(choice, part)
        if isinstance(error, jinja2.TemplateSyntaxError):
            name = error.filename or str(where)
            return f"{name}:{error.lineno}: {error.message}"
        return f"{where}: {error.message or type(error).__name__}"

    def revision(self, choice: Choice) -> str:
        """A content hash of every file this choice renders from (its parts and what they
        extend or include), so a ledger row names exactly what was sent."""
        if choice not in self._revisions:
            digest = hashlib.sha256()
            for name in sorted(self._used(choice)):
                path = self._source(choice.brand, name)
                digest.update(name.encode() + b"\0" + (path.read_bytes() if path else b""))
            self._revisions[choice] = (
                f"{choice.brand or 'default'}/{choice.locale}@{digest.hexdigest()[:12]}"
            )
        return self._revisions[choice]

    def _used(self, choice: Choice) -> set[str]:
        env, seen = self._envs[choice.brand], set()
        pending = [f"{choice.locale}/{part}" for part in PARTS]
        while pending:
            name = pending.pop()
            path = self._source(choice.brand, name)
            if name in seen or path is None:
                continue
            seen.add(name)
            try:
                found = meta.find_referenced_templates(env.parse(path.read_text("utf-8")))
            except jinja2.TemplateSyntaxError:
                continue  # render() names the file and the line
            pending.extend(n for n in found if n)
        return seen
