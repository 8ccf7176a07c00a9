"""Is the directory's address one mailbox we may hand a provider? Checked before every send.

The directory is the studio's and its address goes into the provider's ``To`` unchanged, so
a record holding ``a@x, b@y`` would send one reset link to two people (Postmark's ``To``:
"Multiple addresses are comma separated", https://postmarkapp.com/developer/api/email-api)
and a CR or LF could start a header of its own. The check accepts one
RFC 5322 ``addr-spec`` in its dot-atom form (section 3.4.1), with the UTF-8 characters RFC
6532 section 3.2 adds for internationalised addresses; it refuses a quoted local part and a
domain literal (valid RFC 5322, but a quoted part may hold the comma or ``@`` that the
providers' own parsers split on, and no player address needs either), any whitespace or
control or bidi formatting character, and the lengths RFC 5321 section 4.5.3.1 bounds.
The loop is linear and stops at the first bad character; there is no regular expression.
"""

from __future__ import annotations

import unicodedata

MAX_ADDRESS = 254  # RFC 5321 4.5.3.1.3 (a 256-octet path, less its angle brackets)
MAX_LOCAL = 64  # RFC 5321 4.5.3.1.1
MAX_LABEL = 63  # RFC 1035 2.3.4
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ATEXT = frozenset(_ALNUM + "!#$%&'*+-/=?^_`{|}~")  # RFC 5322 3.2.3
_LABEL = frozenset(_ALNUM + "-")
# Unicode categories never part of an address: controls, formats (bidi, zero width),
# separators, surrogates, private use, unassigned.
_NOT_TEXT = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def problem(address: str) -> str:
    """Why ``address`` is not one mailbox, as a predicate ("is empty"; "" when it is one):
    words safe to log and store, never the address itself."""
    if not address:
        return "is empty"
    if len(address.encode("utf-8", "surrogatepass")) > MAX_ADDRESS:
        return "is longer than 254 octets"
    bad = next((c for c in address if c.isascii() and (c < " " or c == "\x7f")), None)
    if bad is not None:
        return "holds a control character (CR, LF or the like)"
    if address.count("@") != 1:
        return "is not one mailbox (it must hold exactly one at sign)"
    local, domain = address.split("@")
    return _local_problem(local) or _domain_problem(domain)


def _utf8(c: str) -> bool:
    """A character RFC 6532 lets into an address: non-ASCII and printable."""
    return not c.isascii() and unicodedata.category(c) not in _NOT_TEXT


def _dot_atom(text: str, allowed: frozenset[str]) -> bool:
    parts = text.split(".")
    return all(p and all(c in allowed or _utf8(c) for c in p) for p in parts)


def _local_problem(local: str) -> str:
    if len(local.encode("utf-8", "surrogatepass")) > MAX_LOCAL:
        return "has a local part longer than 64 octets"
    if not _dot_atom(local, _ATEXT):
        return "is not one RFC 5322 mailbox (its local part)"
    return ""


def _domain_problem(domain: str) -> str:
    labels = domain.split(".")
    shaped = _dot_atom(domain, _LABEL) and all(
        len(x) <= MAX_LABEL and not x.startswith("-") and not x.endswith("-") for x in labels
    )
    return "" if shaped else "is not one RFC 5322 mailbox (its domain)"
