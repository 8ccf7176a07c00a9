"""Amazon SES v2 ``SendEmail`` through aiobotocore (botocore signs; no hand-written SigV4).

Credentials and region come from the standard AWS chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, web identity, instance role …; ``AWS_REGION``
or ``AWS_DEFAULT_REGION``); ``RESETGATE_PROVIDER_URL`` overrides the endpoint (tests point
it at moto's server).

Sources (read 2026-11):
- SendEmail: https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html
  (errors: AccountSuspendedException, BadRequestException, LimitExceededException,
  MailFromDomainNotVerifiedException, MessageRejected, NotFoundException,
  SendingPausedException, TooManyRequestsException; ``EmailTags`` travel into events)
- Common errors: https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html
  (AccessDeniedException, ExpiredTokenException, IncompleteSignature,
  InvalidClientTokenId, ThrottlingException, InternalFailure, ServiceUnavailable …)
- GetAccount: https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_GetAccount.html
  (``SendQuota.MaxSendRate``); v1 GetSendQuota is the fallback.
- Message size: 40 MB (v2), 50 recipients per message.
- Templates: ``Content.Template`` with ``TemplateName`` and ``TemplateData`` (a JSON string),
  https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_Template.html; the template
  (CreateEmailTemplate) holds the subject and both parts. SendEmail answers a template it
  cannot find with NotFoundException (v1 says TemplateDoesNotExist).
- Whose refusal: "Email address is not verified. The following identities failed the check
  in region …: identity1, identity2" names the identities
  (https://docs.aws.amazon.com/ses/latest/dg/troubleshoot-error-messages.html). In the SES
  sandbox the recipient must be verified too
  (https://docs.aws.amazon.com/ses/latest/dg/request-production-access.html): an identity
  that is the recipient fails that reset; the From (or its domain) pauses SES. A
  NotFoundException or BadRequestException naming the configuration set is ours
  (SendEmail's ``ConfigurationSetName``, "does not exist"): SES pauses.

No native idempotency key, no lookup: an ambiguous send waits for the event window.
botocore's own retries are off: a retried SendEmail after a timeout is a second email.
"""

from __future__ import annotations

import contextlib
import logging
import math
from email.utils import parseaddr
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
)
from pydantic import AliasChoices, Field

from shared import codec
from shared.from_address import parse as parse_from
from shared.logging import event
from shared.model import Outcome
from shared.providers.base import (
    QUOTA_EXCEEDED,
    Capabilities,
    EventModel,
    LookupResult,
    Message,
    RateSignalKind,
    SendResult,
    account_refused,
    message_id,
    recipient_refused,
    undocumented_refusal,
)
from shared.providers.kind import Kind, ProviderConfig
from shared.settings import SANDBOX_URL, KindSettings, ProviderAccount, kind_settings_as

log = logging.getLogger(__name__)
CAPABILITIES = Capabilities(
    idempotency_key="",
    idempotency_retention_seconds=0,
    lookup=None,
    rate_signals=frozenset({RateSignalKind.ACCOUNT_QUOTA, RateSignalKind.NONE}),
    events=EventModel.QUEUE,
    max_message_bytes=40 * 1024 * 1024,
    max_recipients=50,
    success_statuses=frozenset({200}),
)
ERROR_CODES: dict[str, Outcome] = {
    "TooManyRequestsException": Outcome.THROTTLED,
    "ThrottlingException": Outcome.THROTTLED,
    "Throttling": Outcome.THROTTLED,
    "LimitExceededException": Outcome.THROTTLED,
    # Account-level refusals: every send would fail alike, so the provider pauses.
    "SendingPausedException": Outcome.AUTH,
    "AccountSuspendedException": Outcome.AUTH,
    "MailFromDomainNotVerifiedException": Outcome.AUTH,
    "RequestExpired": Outcome.AUTH,  # our clock is more than 15 minutes off
    "AccessDeniedException": Outcome.AUTH,
    "AccessDenied": Outcome.AUTH,
    "ExpiredTokenException": Outcome.AUTH,
    "IncompleteSignature": Outcome.AUTH,
    "InvalidClientTokenId": Outcome.AUTH,
    "UnrecognizedClientException": Outcome.AUTH,
    "SignatureDoesNotMatch": Outcome.AUTH,
    "NotAuthorized": Outcome.AUTH,
    "MessageRejected": Outcome.PERMANENT,
    "BadRequestException": Outcome.PERMANENT,
    "NotFoundException": Outcome.PERMANENT,
    "ValidationError": Outcome.PERMANENT,
    "InternalFailure": Outcome.TRANSIENT,
    "ServiceUnavailable": Outcome.TRANSIENT,
}


# With a hosted template, "not found" is the template: every send would fail alike, so it
# is an account-level refusal (the provider pauses) rather than a failed reset.
TEMPLATE_MISSING = frozenset({"NotFoundException", "TemplateDoesNotExist"})


def content(message: Message) -> dict[str, Any]:
    hosted = message.get("template")
    if hosted:
        return {
            "Template": {
                "TemplateName": hosted["name"],
                "TemplateData": codec.dumps(hosted["data"]).decode(),
            }
        }
    body: dict[str, Any] = {"Text": {"Data": message["text"], "Charset": "UTF-8"}}
    if message.get("html"):
        body["Html"] = {"Data": message["html"], "Charset": "UTF-8"}
    return {"Simple": {"Subject": {"Data": message["subject"], "Charset": "UTF-8"}, "Body": body}}


def request(operation_id: str, message: Message, configuration_set: str = "") -> dict[str, Any]:
    shaped = {
        # A non-ASCII name as RFC 2047 (SendEmail: FromEmailAddress).
        "FromEmailAddress": parse_from(message["from"]).encoded,
        "Destination": {"ToAddresses": list(message["to"])},
        "Content": content(message),
        "EmailTags": [{"Name": "operation_id", "Value": operation_id}],
    }
    if configuration_set:
        # SES publishes events only for a message sent with a configuration set
        # (docs.aws.amazon.com/ses/latest/dg/using-configuration-sets.html).
        shaped["ConfigurationSetName"] = configuration_set
    return shaped


# The AUTH codes about the account, its identities or our clock, not our credentials.
ACCOUNT_CODES = frozenset(
    {
        "SendingPausedException",
        "AccountSuspendedException",
        "MailFromDomainNotVerifiedException",
        "RequestExpired",
    }
)
# MessageRejected "Email address is not verified. The following identities failed the check
# in region …: a, b": the identities it names say whose (see unverified()).
_UNVERIFIED = "not verified"
_CONFIGURATION_SET = "configuration set"
# The codes SendEmail documents that refuse the request's content or a recipient.
_RECIPIENT_CODES = frozenset({"MessageRejected", "BadRequestException", "ValidationError"})


def classify_error(
    error: ClientError, templated: bool = False, message: Message | None = None
) -> SendResult:
    """``message``: the send, to tell its recipient from its From in SES's words."""
    info = error.response.get("Error", {})
    code, words = str(info.get("Code", "")), str(info.get("Message", ""))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code == "MessageRejected" and _UNVERIFIED in words.lower():
        return unverified(status, words, message)
    if code in ACCOUNT_CODES:
        return account_refused(status, code, words or code)
    if code in TEMPLATE_MISSING and _CONFIGURATION_SET in words.lower():
        return account_refused(status, "configuration_set_not_found", words)
    if code == "BadRequestException" and _CONFIGURATION_SET in words.lower():
        return account_refused(status, "configuration_set_invalid", words)
    if templated and code in TEMPLATE_MISSING:
        return account_refused(status, "template_not_found", words or code)
    outcome = ERROR_CODES.get(code) or _by_status(status)
    if outcome is Outcome.THROTTLED and "quota" in str(info.get("Message", "")).lower():
        # "Daily message quota exceeded": not a rate, a window to wait out (shared.quota).
        return SendResult(outcome, status, reason=QUOTA_EXCEEDED)
    reason = code or f"http_{status}"
    if outcome is Outcome.PERMANENT and code not in _RECIPIENT_CODES:
        return undocumented_refusal(status, reason)
    return SendResult(outcome, status, reason=reason)


def unverified(status: int, words: str, message: Message | None) -> SendResult:
    """An identity failed SES's verification check: the From (or its domain) pauses SES;
    identities that are all this send's recipients (the account is in the SES sandbox)
    fail this reset only. One SES names neither way is taken as the From's."""
    named = _identities(words)
    sender = _address(str(message["from"])) if message else ""
    recipients = {_address(str(to)) for to in (message or {}).get("to", [])}
    ours = {sender, sender.partition("@")[2]} - {""}
    if named and not named & ours and named <= recipients:
        return recipient_refused(status, "recipient_not_verified")
    return account_refused(status, "MessageRejected", words or "MessageRejected")


def _identities(words: str) -> set[str]:
    """The identities after "failed the check in region …:" ("" parts dropped), lowered."""
    _, colon, tail = words.partition("failed the check")
    if not colon:
        return set()
    listed = tail.partition(":")[2]
    return {part.strip().strip(".").lower() for part in listed.split(",")} - {""}


def _address(text: str) -> str:
    return parseaddr(text)[1].lower()


def _by_status(status: int) -> Outcome:
    """An error code we do not know: AWS answers credential problems with 401/403."""
    if status in (401, 403):
        return Outcome.AUTH
    return Outcome.TRANSIENT if status >= 500 or status == 0 else Outcome.PERMANENT


def transport_error(error: BotoCoreError) -> SendResult:
    if isinstance(error, EndpointConnectionError | ConnectTimeoutError):
        return SendResult(Outcome.TRANSIENT, reason=f"not_sent:{type(error).__name__}")
    if isinstance(error, NoCredentialsError):
        return SendResult(Outcome.AUTH, reason="no_credentials")
    return SendResult(Outcome.AMBIGUOUS, reason=f"lost:{type(error).__name__}")


class SesProvider:
    capabilities = CAPABILITIES

    def __init__(
        self,
        region: str,
        endpoint_url: str = "",
        *,
        connect_timeout: float = 3.0,
        total_timeout: float = 15.0,
        name: str = "ses",
        configuration_set: str = "",
    ) -> None:
        self.name = name
        self.configuration_set = configuration_set
        self.region = region
        self.endpoint_url = endpoint_url or None
        # aiobotocore is imported here, not at the top: it costs 0.6 s of CPU per process (1 s
        # without cached bytecode), which every sender, poller and `resetgate` command would pay
        # for SES whether or not a partition sends through it.
        from aiobotocore.config import AioConfig

        self.config = AioConfig(
            connect_timeout=connect_timeout,
            read_timeout=total_timeout,
            retries={"total_max_attempts": 1, "mode": "standard"},
        )
        self._stack = contextlib.AsyncExitStack()
        self._clients: dict[str, Any] = {}

    async def _client(self, service: str) -> Any:
        if service not in self._clients:
            from aiobotocore.session import get_session

            self._clients[service] = await self._stack.enter_async_context(
                get_session().create_client(
                    service,
                    region_name=self.region,
                    endpoint_url=self.endpoint_url,
                    config=self.config,
                )
            )
        return self._clients[service]

    async def client(self, service: str) -> Any:
        """The account's aiobotocore client of ``service`` (the preflight's read-only calls)."""
        return await self._client(service)

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._clients.clear()

    async def send(self, operation_id: str, message: Message) -> SendResult:
        client = await self._client("sesv2")
        try:
            reply = await client.send_email(
                **request(operation_id, message, self.configuration_set)
            )
        except ClientError as error:
            return classify_error(error, templated="template" in message, message=message)
        except BotoCoreError as error:
            return transport_error(error)
        found = message_id(reply.get("MessageId"))
        if not found:
            return SendResult(Outcome.AMBIGUOUS, 200, reason="accepted_without_id")
        return SendResult(Outcome.ACCEPTED, 200, found)

    async def lookup(self, operation_id: str) -> LookupResult:
        raise NotImplementedError("SES declares no lookup (capabilities.lookup is None)")

    async def max_send_rate(self) -> float | None:
        """The account's MaxSendRate: v2 GetAccount, else v1 GetSendQuota, else None (a
        missing quota is not an error; moto 5.2 answers GetAccount with 404)."""
        rate = await self._send_quota("MaxSendRate")
        if rate is None:
            event(log, logging.INFO, "provider reports no maximum send rate", provider=self.name)
        return rate

    async def daily_quota(self) -> float | None:
        """The account's Max24HourSend (sends per rolling 24 h), read as MaxSendRate is."""
        return await self._send_quota("Max24HourSend")

    async def _send_quota(self, field: str) -> float | None:
        for service, call in (("sesv2", "get_account"), ("ses", "get_send_quota")):
            with contextlib.suppress(ClientError, BotoCoreError, KeyError, TypeError, ValueError):
                reply = await getattr(await self._client(service), call)()
                value = float(reply.get("SendQuota", reply)[field])
                if math.isfinite(value) and value > 0:
                    return value
        return None


class SesSettings(KindSettings):
    """What only an SES account reads: its configuration set (``RESETGATE_SES_CONFIGURATION_SET``,
    a configured name's own else that one) and the region the AWS SDKs read."""

    INHERITED = ("ses_configuration_set",)

    # SES publishes delivery events (SNS -> SQS, RESETGATE_SES_QUEUE_URL) only for messages
    # sent with a configuration set: without one an ambiguous SES send is never settled.
    ses_configuration_set: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9_-]{0,64}$",
        description="SES ConfigurationSetName sent with every message (its event destination "
        "feeds the SES queue)",
    )
    # The region the AWS SDKs read: AWS_REGION, else AWS_DEFAULT_REGION ("": neither).
    ses_region: str = Field(
        default="", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION")
    )


class SesInbound(KindSettings):
    """Where the poller reads SES's events: the SQS queue subscribed to the configuration
    set's SNS topic (``RESETGATE_SES_QUEUE_URL``, a configured name's
    ``RESETGATE_PROVIDER_<NAME>_SES_QUEUE_URL``), its dead-letter queue, and the SQS client's
    long poll, region and endpoint (a name that leaves those unset takes the process's)."""

    INHERITED = ("ses_wait_seconds", "aws_region", "aws_endpoint_url")

    ses_queue_url: str = ""
    ses_dead_letter_queue_url: str = ""  # unparseable messages go here (else to the redrive)
    ses_wait_seconds: int = Field(default=20, ge=0, le=20)  # SQS long poll
    # The queue's region: RESETGATE_AWS_REGION, not the SDKs' AWS_REGION the sender's SES
    # account reads (SesSettings.ses_region).
    aws_region: str = "us-east-1"
    aws_endpoint_url: str = ""  # only for an emulator; credentials come from the AWS chain


def _adapter(config: ProviderConfig, _session: object) -> SesProvider:
    # The http default points at the local sandbox, which SES never is.
    endpoint = "" if config.url.rstrip("/") == SANDBOX_URL else config.url
    own = config.own(SesSettings)
    return SesProvider(
        own.ses_region,
        endpoint,
        name=config.name,
        configuration_set=own.ses_configuration_set,
        **config.timeouts,
    )


def _lacks(account: ProviderAccount) -> str:
    # No key (the AWS credential chain) and a default endpoint, but a region.
    region = kind_settings_as(account.kind_settings, SesSettings).ses_region
    return "" if region else "AWS_REGION: required for kind ses (or AWS_DEFAULT_REGION)"


# The sandbox has no SES dialect: tests run moto's server (tests/support/moto_server.py).
# Events arrive on a queue (SNS -> SQS), decoded by the poller's SES module.
KIND = Kind(
    "ses",
    _adapter,
    lambda _: CAPABILITIES,
    settings=SesSettings,
    inbound_settings=SesInbound,
    event_credential="SES_QUEUE_URL",
    inbound_decoder="services.poller.inbound.ses",
    vendor="Amazon SES",
    hosts_templates=True,
    preflight="shared.preflight.ses:checks",
    lacks=_lacks,
)
