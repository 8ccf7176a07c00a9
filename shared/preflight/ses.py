"""Preflight checks of Amazon SES v2, read-only calls only:

- GetAccount (docs.aws.amazon.com/ses/latest/APIReference-V2/API_GetAccount.html):
  ``SendingEnabled``, ``ProductionAccessEnabled`` (false: the account is in the sandbox and
  sends only to verified addresses), ``SendQuota``.
- GetEmailIdentity (.../API_GetEmailIdentity.html): ``VerificationStatus`` SUCCESS (or
  ``VerifiedForSendingStatus``) for the From's domain, else its address; NotFoundException
  when SES has neither.
- GetConfigurationSet (.../API_GetConfigurationSet.html): NotFoundException when the set
  RESETGATE_SES_CONFIGURATION_SET names does not exist. Without a set SES publishes no
  events for a send (docs.aws.amazon.com/ses/latest/dg/using-configuration-sets.html).

moto 5.2 answers GetAccount with 404 (not implemented): those checks say unknown there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from shared.from_address import FromAddress
from shared.preflight import Check, Status, Target
from shared.providers.ses import SesProvider, SesSettings

# Answers about our credentials (CommonErrors): the key check fails. AccessDenied is the
# IAM policy not allowing the read, which says nothing about sending: unknown.
WRONG_KEY = frozenset(
    {
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "ExpiredTokenException",
        "IncompleteSignature",
        "RequestExpired",
    }
)
NOT_FOUND = frozenset({"NotFoundException", "ConfigurationSetDoesNotExist"})
CONFIGURATION_SET_VARIABLE = "RESETGATE_SES_CONFIGURATION_SET"


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


async def _call(
    provider: SesProvider, call: str, **kwargs: str
) -> dict[str, Any] | ClientError | None:
    """The reply, the ClientError SES answered, or None when nothing answered."""
    try:
        client = await provider.client("sesv2")
        reply: dict[str, Any] = await getattr(client, call)(**kwargs)
        return reply
    except ClientError as error:
        return error
    except BotoCoreError:
        return None


async def checks(target: Target) -> list[Check]:
    provider = cast(SesProvider, target.provider)  # the ses kind's adapter (registry.build)
    name = provider.name
    configuration_set = target.config.own(SesSettings).ses_configuration_set
    account = await _call(provider, "get_account")
    if isinstance(account, ClientError) and _code(account) in WRONG_KEY:
        return [
            Check(
                name,
                "key",
                Status.FAILED,
                f"SES answered {_code(account)}: set valid "
                "AWS credentials (AWS_ACCESS_KEY_ID / role) for AWS_REGION",
            )
        ]
    found = _account(name, account)
    for sender in _distinct(target.froms):
        found.append(await _identity(provider, sender))
    found.append(await _configuration_set(provider, configuration_set))
    return found


def _account(name: str, account: dict[str, Any] | ClientError | None) -> list[Check]:
    if not isinstance(account, dict):
        said = "no answer" if account is None else _code(account) or "an error"
        return [
            Check(
                name,
                "account",
                Status.UNKNOWN,
                f"GetAccount: {said}; check sending, "
                "production access and quota in the SES console",
            )
        ]
    quota = account.get("SendQuota") or {}
    limits = f"quota {quota.get('Max24HourSend', '?')}/24 h at {quota.get('MaxSendRate', '?')}/s"
    sending = account.get("SendingEnabled") is not False
    paused = (
        "SES sending is paused for the account: resolve it in the SES console "
        "(Reputation), then resume sending"
    )
    return [
        Check(
            name,
            "account",
            Status.OK if sending else Status.FAILED,
            f"sending enabled, {limits}" if sending else paused,
        ),
        _production(name, account.get("ProductionAccessEnabled")),
    ]


def _production(name: str, production: object) -> Check:
    if production is True:
        return Check(name, "production", Status.OK, "production access")
    if production is False:
        return Check(
            name,
            "production",
            Status.FAILED,
            "the account is in the SES sandbox: it "
            "sends only to verified addresses; request production access",
        )
    return Check(name, "production", Status.UNKNOWN, "GetAccount said nothing of production access")


def _distinct(froms: Sequence[FromAddress]) -> list[FromAddress]:
    seen: dict[str, FromAddress] = {}
    for sender in froms:
        seen.setdefault(sender.domain, sender)
    return list(seen.values())


async def _identity(provider: SesProvider, sender: FromAddress) -> Check:
    name, domain = provider.name, sender.domain
    for identity in (domain, sender.email):
        reply = await _call(provider, "get_email_identity", EmailIdentity=identity)
        if isinstance(reply, dict) and _verified(reply):
            return Check(name, "identity", Status.OK, f"{domain} verified")
        if reply is None or (isinstance(reply, ClientError) and _code(reply) not in NOT_FOUND):
            said = "no answer" if reply is None else _code(reply)
            return Check(name, "identity", Status.UNKNOWN, f"GetEmailIdentity {domain}: {said}")
    return Check(
        name,
        "identity",
        Status.FAILED,
        f"SES in {provider.region} has no verified "
        f"identity for {domain} nor the From: verify the domain in that region",
    )


def _verified(reply: dict[str, Any]) -> bool:
    status = reply.get("VerificationStatus")
    return status == "SUCCESS" if status else reply.get("VerifiedForSendingStatus") is True


async def _configuration_set(provider: SesProvider, configuration_set: str) -> Check:
    name = provider.name
    if not configuration_set:
        return Check(
            name,
            "configuration_set",
            Status.FAILED,
            f"{CONFIGURATION_SET_VARIABLE} is not set: SES publishes no events for "
            "these sends (no bounce, complaint or delivery is seen, and an ambiguous "
            "send is never settled by one); create a configuration set with an SNS "
            "event destination and set it",
        )
    reply = await _call(provider, "get_configuration_set", ConfigurationSetName=configuration_set)
    if isinstance(reply, dict):
        return Check(name, "configuration_set", Status.OK, f"{configuration_set} exists")
    if isinstance(reply, ClientError) and _code(reply) in NOT_FOUND:
        return Check(
            name,
            "configuration_set",
            Status.FAILED,
            f"SES has no configuration set {configuration_set} in {provider.region}: "
            f"create it, or correct {CONFIGURATION_SET_VARIABLE}",
        )
    said = "no answer" if reply is None else _code(reply)
    return Check(name, "configuration_set", Status.UNKNOWN, f"GetConfigurationSet: {said}")
