"""Which of the available locales a player gets, from the directory's BCP 47 tag.

``fr-CA`` falls back to ``fr``; ``pt-PT`` to another locale of its language (``pt-BR``) when
there is no ``pt``; Chinese by script (``zh-TW`` reads Traditional, ``zh-CN`` Simplified).
An unknown or malformed tag gets the default: a player's odd locale setting must never cost
them their email.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A BCP 47 tag's shape (RFC 5646 section 2.1, loosely: language, then subtags of 1-8
# letters or digits). Underscores are read as hyphens, as Java and Unity write locales.
_TAG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")
_MAX_TAG = 64
# Chinese without a script subtag: the script its region writes (CLDR likely subtags).
_CHINESE_SCRIPT = {
    "tw": "hant",
    "hk": "hant",
    "mo": "hant",
    "cn": "hans",
    "sg": "hans",
    "my": "hans",
}
# Languages written right to left (CLDR character order), and the scripts that are.
_RTL_LANGUAGES = frozenset({"ar", "he", "fa", "ur", "ps", "yi", "dv", "ckb", "sd", "ug"})
_RTL_SCRIPTS = frozenset({"arab", "hebr", "thaa", "syrc", "nkoo", "adlm"})


def valid_tag(tag: str) -> bool:
    return len(tag) <= _MAX_TAG and bool(_TAG.match(tag.replace("_", "-")))


def _subtags(tag: str) -> list[str]:
    return tag.replace("_", "-").lower().split("-")


def candidates(tag: str) -> list[str]:
    """The tag and its truncations, longest first (RFC 4647 lookup): ``zh-Hant-TW`` ->
    ``zh-hant-tw``, ``zh-hant``, ``zh`` (lower case; an invalid tag has none)."""
    if not valid_tag(tag):
        return []
    parts = _subtags(tag)
    found = ["-".join(parts[:n]) for n in range(len(parts), 0, -1)]
    if parts[0] == "zh" and len(parts) > 1 and parts[1] in _CHINESE_SCRIPT:
        found.insert(len(found) - 1, "zh-" + _CHINESE_SCRIPT[parts[1]])
    return found


def negotiate(tag: str, available: Iterable[str], default: str) -> str:
    """The available locale (as the files spell it) this player reads best, else ``default``."""
    by_lower = {locale.lower(): locale for locale in available}
    for candidate in candidates(tag):
        if candidate in by_lower:
            return by_lower[candidate]
    language = candidates(tag)[-1] if valid_tag(tag) else ""
    same_language = sorted(k for k in by_lower if k.split("-")[0] == language)
    return by_lower[same_language[0]] if language and same_language else default


def direction(locale: str) -> str:
    """``rtl`` or ``ltr``: the ``dir`` of the HTML part."""
    parts = _subtags(locale)
    rtl = parts[0] in _RTL_LANGUAGES or any(p in _RTL_SCRIPTS for p in parts[1:])
    return "rtl" if rtl else "ltr"
