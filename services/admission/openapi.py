"""``/openapi.json``: built from the same body schemas the handlers validate with.

Response schemas are written out here; the schemathesis test checks every response the
server gives against them, so this document and the handlers cannot quietly disagree.
"""

from __future__ import annotations

from typing import Any

from services.admission.schemas import BODIES, BodySchema
from shared import operation_views
from shared.archive import ARCHIVE, HISTORY, MAX_HISTORY, NOT_CONFIGURED, REDIS, UNAVAILABLE
from shared.ids import OPERATION_ID_PATTERN
from shared.model import Delivery, State

_JSON = "application/json"
_BEARER: list[dict[str, list[str]]] = [{"internalBearer": []}]

_INT = {"type": "integer"}
_STR = {"type": "string"}
_NULL_INT = {"type": "integer", "nullable": True}
_NULL_STR = {"type": "string", "nullable": True}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "required": required or list(properties), "properties": properties}


def _retry_after() -> dict[str, Any]:
    return {
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    }


def _reply(description: str, schema: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "description": description,
        "content": {_JSON: {"schema": _ref(schema)}},
    }
    if headers:
        reply["headers"] = headers
    return reply


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    return _reply(description, "Error", headers)


_BAD_BODY = {
    "400": _error("The body is not valid JSON, or its Content-Encoding does not decode."),
    "413": _error("The body is larger than RESETGATE_MAX_BODY_BYTES (16 KiB by default)."),
    "408": _error("The body did not arrive within RESETGATE_BODY_TIMEOUT_SECONDS (10 s)."),
    "415": _error("Content-Type is not application/json."),
    "422": _error("A field is missing, unknown, of the wrong type, too long or not allowed."),
}
_UNAVAILABLE = {"503": _error("Directory, store or replicas unavailable; retry.", _retry_after())}
_UNAUTHORIZED = {
    "401": _error(
        "Missing or wrong bearer token.", {"WWW-Authenticate": {"required": True, "schema": _STR}}
    ),
}


def _body(schema: BodySchema) -> dict[str, Any]:
    return {"required": True, "content": {_JSON: {"schema": _ref(schema.name)}}}


def _operation_view() -> dict[str, Any]:
    attempt = _object(
        {
            "attempt_id": _STR,
            "started_at": _INT,
            "outcome": _STR,
            "ended_at": _INT,
            "http_status": _INT,
            "decision": _STR,
            "retry_at": _INT,
            "reason": _STR,
            "consumer": _STR,
        },
    )
    return _object(
        {
            "operation_id": _STR,
            "account_id": _STR,
            "partition": _INT,
            "state": {"type": "string", "enum": [str(s) for s in State]},
            "created_at": _INT,
            "attempts": _INT,
            "remaining_attempts": _INT,
            "next_attempt_at": _NULL_INT,
            "token_expires_at": _INT,
            "token_consumed_at": _NULL_INT,
            "horizon_at": _INT,
            "last_status": _NULL_INT,
            "last_outcome": _NULL_STR,
            "retry_after_source": _NULL_STR,
            "reason": _NULL_STR,
            "provider": _NULL_STR,
            "provider_message_id": _NULL_STR,
            "delivery": {"type": "string", "enum": [str(d) for d in Delivery]},
            "delivery_observed_at": _NULL_INT,
            "observation_closed_at": _NULL_INT,
            "entry_points": {"type": "object", "additionalProperties": _INT},
            "attempt_ledger": {"type": "array", "items": attempt},
            # Where it was read: Redis, or the archive once Redis no longer holds it.
            "source": {"type": "string", "enum": [REDIS, ARCHIVE]},
        },
    )


def _oldest_row() -> dict[str, Any]:
    return _object(
        {
            "operation_id": _STR,
            "account_id": _STR,
            "partition": _INT,
            "state": _STR,
            "created_at": _INT,
            "age_seconds": {"type": "number"},
            "horizon_at": _INT,
            "attempts": _INT,
            "remaining_attempts": _INT,
            "next_attempt_at": _NULL_INT,
            "last_status": _NULL_INT,
            "last_outcome": _NULL_STR,
            "delivery": _STR,
        },
    )


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {body.name: body.openapi() for body in BODIES}
    schemas.update(
        {
            "Error": _object({"error": _STR, "message": _STR}),
            "Received": _object({"status": {"type": "string", "enum": ["received"]}}),
            "Admission": _object(
                {
                    "operation_id": _NULL_STR,
                    "state": _NULL_STR,
                    "created": {"type": "boolean"},
                    "result": {"type": "string", "enum": ["created", "converged", "cooldown"]},
                }
            ),
            "Operation": _operation_view(),
            "AccountHistory": _object(
                {
                    "operations": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/Operation"},
                    },
                    "count": _INT,
                    "archive": {"type": "string", "enum": [ARCHIVE, NOT_CONFIGURED, UNAVAILABLE]},
                }
            ),
            "OldestOperations": _object(
                {"operations": {"type": "array", "items": _oldest_row()}, "count": _INT}
            ),
            "Consumed": _object(
                {
                    "status": {"type": "string", "enum": ["consumed"]},
                    "operation_id": _STR,
                    "account_id": _STR,
                }
            ),
        }
    )
    return schemas


def _public_paths() -> dict[str, Any]:
    return {
        "/v1/password-resets": {
            "post": {
                "operationId": "requestPasswordReset",
                "tags": ["public"],
                "security": [],
                "summary": "Ask for a reset email; the answer never says whether the login exists.",
                "requestBody": _body(BODIES[0]),
                "responses": {
                    "202": _reply(
                        "Received (unknown login, cooldown, resend or new: same body).", "Received"
                    ),
                    **_BAD_BODY,
                    "429": _error("Too many requests from this client network.", _retry_after()),
                    **_UNAVAILABLE,
                },
            }
        },
    }


def _admission_links() -> dict[str, Any]:
    """What an admission's answer feeds (lets a stateful test walk real operations)."""
    return {
        "GetOperation": {
            "operationId": "getOperation",
            "parameters": {"operation_id": "$response.body#/operation_id"},
        },
        "GetAccountOperation": {
            "operationId": "getAccountOperation",
            "parameters": {"account_id": "$request.body#/account_id"},
        },
        # A real operation id, so fuzzed tokens reach the constant-time compare, not a 404.
        "ConsumeToken": {
            "operationId": "consumeToken",
            "requestBody": {"operation_id": "$response.body#/operation_id", "token": "x" * 43},
        },
    }


def _internal_paths() -> dict[str, Any]:
    op_param = {
        "name": "operation_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": OPERATION_ID_PATTERN},
    }
    account_param = {
        "name": "account_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": BODIES[1].fields[0].pattern},
    }
    oldest_param = {
        "name": "oldest",
        "in": "query",
        "required": False,
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": operation_views.MAX_OLDEST,
            "default": 20,
        },
    }
    since_param = {
        "name": "since",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 0, "default": 0},
    }
    limit_param = {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY, "default": HISTORY},
    }
    found = {"404": _error("No such operation."), **_UNAUTHORIZED, **_UNAVAILABLE}
    return {
        "/internal/v1/recovery-operations": {
            "post": {
                "operationId": "admitRecovery",
                "tags": ["internal"],
                "security": _BEARER,
                "summary": "Converge on the account's live operation, or create one.",
                "requestBody": _body(BODIES[1]),
                "responses": {
                    "200": {
                        **_reply("Converged (live operation or cooldown).", "Admission"),
                        "links": _admission_links(),
                    },
                    "201": {
                        **_reply("A new operation and one send job.", "Admission"),
                        "links": _admission_links(),
                    },
                    "404": _error("The directory has no such account."),
                    **_BAD_BODY,
                    **_UNAUTHORIZED,
                    **_UNAVAILABLE,
                },
            },
            "get": {
                "operationId": "oldestOperations",
                "tags": ["internal"],
                "security": _BEARER,
                "summary": "The N oldest live operations across partitions, one row each.",
                "parameters": [oldest_param],
                "responses": {
                    "200": _reply("Oldest first.", "OldestOperations"),
                    "422": _error("'oldest' is not an integer in range."),
                    **_UNAUTHORIZED,
                    **_UNAVAILABLE,
                },
            },
        },
        "/internal/v1/recovery-operations/{operation_id}": {
            "get": {
                "operationId": "getOperation",
                "tags": ["internal"],
                "security": _BEARER,
                "parameters": [op_param],
                "responses": {
                    "200": _reply("The operation and its attempt ledger.", "Operation"),
                    **found,
                },
            }
        },
        "/internal/v1/accounts/{account_id}/recovery-operation": {
            "get": {
                "operationId": "getAccountOperation",
                "tags": ["internal"],
                "security": _BEARER,
                "parameters": [account_param],
                "responses": {
                    "200": _reply("The live operation, else the last one.", "Operation"),
                    **found,
                },
            }
        },
        "/internal/v1/accounts/{account_id}/recovery-operations": {
            "get": {
                "operationId": "getAccountHistory",
                "tags": ["internal"],
                "security": _BEARER,
                "summary": "The account's operations since a time, from Redis and the archive.",
                "parameters": [account_param, since_param, limit_param],
                "responses": {
                    "200": _reply("Newest first; each says where it was read.", "AccountHistory"),
                    "404": _error("Not an account id."),
                    "422": _error("'since' or 'limit' is not an integer in range."),
                    **_UNAUTHORIZED,
                    **_UNAVAILABLE,
                },
            }
        },
        "/internal/v1/reset-tokens/consume": {
            "post": {
                "operationId": "consumeToken",
                "tags": ["internal"],
                "security": _BEARER,
                "summary": "Use a reset token once; closes the account's live operation.",
                "requestBody": _body(BODIES[2]),
                "responses": {
                    "200": _reply("Consumed.", "Consumed"),
                    "403": _error("The token does not belong to this operation."),
                    "404": _error("No such operation."),
                    "409": _error("The token was already used."),
                    "410": _error("The token expired or a newer reset superseded it."),
                    **_BAD_BODY,
                    **_UNAUTHORIZED,
                    **_UNAVAILABLE,
                },
            }
        },
    }


def _operational_paths() -> dict[str, Any]:
    # /healthz, /readyz and /metrics are not here: they are served on the operational
    # listener (RESETGATE_METRICS_PORT), never next to the API (docs/api.md).
    def get(operation_id: str, responses: dict[str, Any]) -> dict[str, Any]:
        return {
            "get": {
                "operationId": operation_id,
                "tags": ["operations"],
                "security": [],
                "responses": responses,
            }
        }

    return {
        "/openapi.json": get(
            "openapi",
            {
                "200": {
                    "description": "This document.",
                    "content": {_JSON: {"schema": {"type": "object"}}},
                }
            },
        ),
    }


def document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "resetgate admission",
            "version": "1",
            "description": "Password-recovery admission: one request, one operation, one token.",
        },
        "paths": {**_public_paths(), **_internal_paths(), **_operational_paths()},
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "internalBearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "RESETGATE_INTERNAL_API_TOKEN",
                }
            },
        },
    }
