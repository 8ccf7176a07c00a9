"""Reset tokens: derived, never stored.

``token = base64url(HMAC-SHA256(K[kid], "reset:" + operation_id))``. The sender derives it
for every attempt, so retries, replays and restarts always carry the same token; the store
keeps only the key id. Rotation: the first key is current, older ones keep verifying.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass


class TokenKeyError(ValueError):
    """RESETGATE_TOKEN_KEYS is malformed; the message never repeats a secret."""


@dataclass(frozen=True)
class TokenKeys:
    current_kid: str
    secrets: dict[str, bytes]

    def derive(self, operation_id: str, kid: str | None = None) -> str:
        key = self.secrets[kid or self.current_kid]
        mac = hmac.new(key, b"reset:" + operation_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def verify(self, operation_id: str, kid: str, token: str) -> bool:
        """Constant-time; an unknown kid verifies nothing (and takes the same path)."""
        expected = self.derive(operation_id, kid) if kid in self.secrets else ""
        return hmac.compare_digest(expected.encode(), token.encode()) and bool(expected)


def parse_keys(spec: str) -> TokenKeys:
    """Parse ``kid:secret,kid2:secret2``; the first entry is the current key."""
    entries = [item.strip() for item in spec.split(",") if item.strip()]
    if not entries:
        raise TokenKeyError("must list at least one kid:secret")
    secrets: dict[str, bytes] = {}
    for index, entry in enumerate(entries):
        kid, sep, secret = entry.partition(":")
        if not sep or not kid or not secret:
            raise TokenKeyError(f"entry {index + 1} is not kid:secret")
        if len(secret) < 16:
            raise TokenKeyError(f"secret for kid {kid!r} is shorter than 16 characters")
        if kid in secrets:
            raise TokenKeyError(f"kid {kid!r} appears twice")
        secrets[kid] = secret.encode()
    return TokenKeys(current_kid=entries[0].partition(":")[0], secrets=secrets)
