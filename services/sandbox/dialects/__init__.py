"""One module per provider mode of the sandbox; ``DIALECTS`` maps a mode to it."""

from __future__ import annotations

from services.sandbox.dialects import mailgun, postmark, sendgrid
from services.sandbox.modes import Dialect

DIALECTS: dict[str, Dialect] = {
    "sendgrid": sendgrid.DIALECT,
    "postmark": postmark.DIALECT,
    "mailgun": mailgun.DIALECT,
}
