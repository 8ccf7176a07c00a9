"""What ``resetgate up`` wires beyond starting processes: the sandbox's pushed events to the
poller, several named providers (one sandbox each), the console, and the control record
cleaned of partitions assigned to a provider this run does not configure.

Pushed events are wired as a deployment wires them (docs/providers.md): the sandbox, speaking
SendGrid, Mailgun or Postmark, POSTs its signed events to the poller's webhook port, and the
poller holds the matching credential. SendGrid signs with a key pair the sandbox makes at
start, so its verification key is read from the running sandbox through SendGrid's
documented route (``GET /v3/user/webhooks/event/settings/signed/{id}``).
"""

from __future__ import annotations

import json
import secrets
import urllib.request
from urllib.parse import quote

import redis

from shared.keys import CONTROL
from shared.providers.named import LIST_VARIABLE, variable

POSTMARK_USER = "postmark-hooks"
# Made once per .run/ with the other local secrets, so a restart keeps them.
HOOK_SECRETS = ("RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY", "RESETGATE_POSTMARK_WEBHOOK_PASSWORD")
# The sandbox modes that push their events (a dialect with a hook, services/sandbox/dialects),
# named here because the CLI starts the sandbox as a process and imports no other service;
# tests/ctl/test_localstack.py holds the two to the same list.
PUSHING_MODES = frozenset({"sendgrid", "mailgun", "postmark"})


def pushes_events(kind: str) -> bool:
    """Whether this provider pushes its events (a webhook) rather than only keeping a feed."""
    return kind in PUSHING_MODES


def new_hook_secrets() -> dict[str, str]:
    return {name: secrets.token_urlsafe(24) for name in HOOK_SECRETS}


def webhook_env(kept: dict[str, str], kind: str, hook_port: int) -> dict[str, str]:
    """The sandbox's push target and the poller's credential for ``kind`` ({} if it has no
    webhooks); ``kept``: the local secrets. SendGrid's key comes from :func:`sendgrid_key`
    once the sandbox runs."""
    if not pushes_events(kind):
        return {}
    auth = ""
    values = {"RESETGATE_WEBHOOK_PORT": str(hook_port)}
    if kind == "mailgun":
        key = kept["RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY"]
        values["RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY"] = key
        values["RESETGATE_SANDBOX_WEBHOOK_SIGNING_KEY"] = key
    if kind == "postmark":
        password = kept["RESETGATE_POSTMARK_WEBHOOK_PASSWORD"]
        values["RESETGATE_POSTMARK_WEBHOOK_USERNAME"] = POSTMARK_USER
        values["RESETGATE_POSTMARK_WEBHOOK_PASSWORD"] = password
        auth = f"{POSTMARK_USER}:{quote(password, safe='')}@"
    values["RESETGATE_SANDBOX_WEBHOOK_URL"] = f"http://{auth}127.0.0.1:{hook_port}/webhooks/{kind}"
    return values


def sendgrid_key(sandbox_url: str, api_key: str, timeout: float = 5.0) -> dict[str, str]:
    """The poller's SendGrid verification key, read from the running sandbox."""
    # The sandbox this command started: an http:// URL it made itself.
    request = urllib.request.Request(  # noqa: S310
        f"{sandbox_url}/v3/user/webhooks/event/settings/signed/resetgate",
        headers={"Authorization": f"Bearer {api_key}"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310
        key = str(json.loads(answer.read())["public_key"])
    return {"RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY": key}


def named_providers(names: list[str], kind: str, ports: list[int], api_key: str) -> dict[str, str]:
    """``RESETGATE_PROVIDERS`` and each name's kind, URL and key: one sandbox per name."""
    values = {LIST_VARIABLE: ",".join(names)}
    for name, port in zip(names, ports, strict=True):
        values[variable(name, "KIND")] = kind
        values[variable(name, "URL")] = f"http://127.0.0.1:{port}"
        values[variable(name, "API_KEY")] = api_key
    return values


def configured_names(env: dict[str, str]) -> list[str]:
    listed = env.get(LIST_VARIABLE, "").strip()
    if listed:
        return [name.strip() for name in listed.split(",")]
    return [env.get("RESETGATE_PROVIDER_NAME", "default")]


def forget_unconfigured(redis_url: str, names: list[str], timeout: float = 5.0) -> dict[int, str]:
    """Give back to the default provider every partition a previous run assigned to a
    provider this run does not configure (a sender skips those: nothing would send them).
    Returns what was forgotten, partition -> provider."""
    with redis.Redis.from_url(redis_url, socket_timeout=timeout, decode_responses=True) as client:
        raw = client.hgetall(CONTROL)
        stale = {
            int(k[9:]): v for k, v in raw.items() if k.startswith("provider:") and v not in names
        }
        if stale:
            client.hdel(CONTROL, *(f"provider:{p}" for p in stale))
    return stale
