"""Request bodies: one declaration drives both validation and the OpenAPI document.

The handlers validate with :meth:`BodySchema.validate` and ``/openapi.json`` renders the
same objects with :meth:`BodySchema.openapi`, so the document cannot drift from what the
handlers accept. Unknown fields are rejected: a typo in a field name should fail loudly
instead of being silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.errors import ApiError
from shared.ids import ACCOUNT_ID_PATTERN, ACTOR_PATTERN, OPERATION_ID_PATTERN, matches
from shared.model import EntryPoint

TOKEN_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"  # noqa: S105 - a shape, not a secret


@dataclass(frozen=True, slots=True)
class Field:
    """One string field (every body field resetgate accepts is a string)."""

    name: str
    description: str
    required: bool = True
    max_length: int = 128
    min_length: int = 1
    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    example: str | None = None

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "description": self.description}
        if self.example is not None:
            schema["example"] = self.example
        if self.enum is not None:
            schema["enum"] = list(self.enum)
            return schema
        schema["minLength"] = self.min_length
        schema["maxLength"] = self.max_length
        if self.pattern is not None:
            schema["pattern"] = self.pattern
        return schema

    def check(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ApiError(422, "invalid_field", f"field '{self.name}' must be a string")
        if self.enum is not None:
            if value not in self.enum:
                allowed = ", ".join(self.enum)
                raise ApiError(
                    422, "invalid_field", f"field '{self.name}' must be one of: {allowed}"
                )
            return value
        if not self.min_length <= len(value) <= self.max_length:
            raise ApiError(
                422,
                "invalid_field",
                f"field '{self.name}' must be {self.min_length} to {self.max_length} characters",
            )
        if self.pattern is not None and not matches(self.pattern, value):
            raise ApiError(422, "invalid_field", f"field '{self.name}' must match {self.pattern}")
        return value


@dataclass(frozen=True, slots=True)
class BodySchema:
    name: str
    fields: tuple[Field, ...]

    def openapi(self) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": False,
            "required": [f.name for f in self.fields if f.required],
            "properties": {f.name: f.openapi() for f in self.fields},
        }

    def validate(self, body: Any) -> dict[str, str]:
        """The body's fields as strings, or :class:`ApiError` naming the first problem."""
        if not isinstance(body, dict):
            raise ApiError(422, "invalid_body", "the body must be a JSON object")
        known = {f.name for f in self.fields}
        unknown = sorted(str(k) for k in body if k not in known)
        if unknown:
            raise ApiError(422, "unknown_field", f"unknown field '{unknown[0][:64]}'")
        values: dict[str, str] = {}
        for field in self.fields:
            if field.name not in body:
                if field.required:
                    raise ApiError(422, "missing_field", f"field '{field.name}' is required")
                continue
            values[field.name] = field.check(body[field.name])
        return values


PASSWORD_RESET = BodySchema(
    "PasswordResetRequest",
    (
        Field(
            "login",
            "The player's login (often an email address).",
            max_length=254,
            example="player@example.com",
        ),
    ),
)
RECOVERY_OPERATION = BodySchema(
    "RecoveryOperationRequest",
    (
        Field(
            "account_id", "The account to recover.", pattern=ACCOUNT_ID_PATTERN, example="acct-1"
        ),
        Field("entry_point", "Who asks.", enum=tuple(str(e) for e in EntryPoint), example="agent"),
        Field(
            "actor",
            "Who acted (agent name, job name); recorded on the operation. A name, never an "
            "address or a URL.",
            required=False,
            min_length=0,
            max_length=128,
            pattern=ACTOR_PATTERN,
            example="agent:ann",
        ),
    ),
)
CONSUME_TOKEN = BodySchema(
    "ConsumeTokenRequest",
    (
        Field(
            "operation_id",
            "The operation the reset link names.",
            pattern=OPERATION_ID_PATTERN,
            max_length=64,
            example="op-3-01M8KVZDNBE35GX41B1GG54MAF",
        ),
        Field("token", "The token from the reset link.", pattern=TOKEN_PATTERN),
    ),
)
BODIES = (PASSWORD_RESET, RECOVERY_OPERATION, CONSUME_TOKEN)
