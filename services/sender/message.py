"""What an attempt sends: the operation's token, the directory's account and its checked
recipient, the composed email; or why nothing can be sent (:class:`Unsent`), which the
attempt finalises without calling the provider."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared import control, mailbox
from shared.directory import Account, Asked, Directory, DirectoryError
from shared.emails.compose import Composed, Hosted, Mailer
from shared.emails.files import TemplateError
from shared.logging import event
from shared.redis import RedisClient
from shared.scripts.attempts import Begun
from shared.tokens import TokenKeys

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ready:
    composed: Composed
    recipient: str  # a digest of the address (the refusals guard counts distinct recipients)


@dataclass(frozen=True, slots=True)
class Unsent:
    """Why nothing was sent. ``failed``: the operation fails, never retried; else it is
    handed back to wait a backoff, attempt refunded (no email left, so it does not count)."""

    reason: str
    failed: bool = False


class Messages:
    def __init__(
        self,
        client: RedisClient,
        directory: Directory,
        keys: TokenKeys,
        mailer: Mailer,
        hosted: Hosted | None = None,
    ) -> None:
        """``hosted``: the provider's own template, when it sends one instead of the local
        files."""
        self.client = client
        self.directory = directory
        self.keys = keys
        self.mailer = mailer
        self.hosted = hosted

    def ask(self, account_id: str) -> Asked | None:
        """The account's directory read, written now when the job names the account and the
        directory is Redis's over the pipelined link: it then shares the begin's round trip
        (the caller drops it when unused). None: :meth:`prepare` reads it after the begin."""
        return self.directory.asked(account_id) if account_id else None

    async def prepare(
        self, operation_id: str, partition: int, begun: Begun, asked: Asked | None = None
    ) -> Ready | Unsent:
        if begun.token_kid and begun.token_kid not in self.keys.secrets:
            return await self._key_missing(operation_id, partition, begun.token_kid)
        found = await self._account(begun, asked)
        if not isinstance(found, Account):
            return found
        token = self.keys.derive(operation_id, begun.token_kid)
        try:
            composed = self.mailer.compose(
                found,
                operation_id=operation_id,
                token=token,
                expires_at_ms=begun.token_expires_at,
                now_ms=begun.body_at,
                hosted=self.hosted,
            )
        except TemplateError as error:
            # Every template was rendered at start; one that fails now (a branch only some
            # values reach) is ours to fix, not the player's: retry later, unspent.
            event(
                log,
                logging.ERROR,
                "template failed to render",
                operation_id=operation_id,
                error=str(error),
            )
            return Unsent("template_error")
        return Ready(composed, control.key_fingerprint(found.email))

    async def _account(self, begun: Begun, asked: Asked | None) -> Account | Unsent:
        try:
            if asked is not None and asked.account_id == begun.account_id:
                account = await asked.account()
            else:  # not asked, or for another account than the operation's: read it now
                account = await self.directory.get_account(begun.account_id)
        except DirectoryError:
            return Unsent("directory_unavailable")  # not the provider's fault: refunded
        if account is None:
            return Unsent("account_not_found", failed=True)
        return _checked_recipient(account, begun)

    async def _key_missing(self, operation_id: str, partition: int, kid: str) -> Unsent:
        """The operation's token was signed with a key this sender lacks (dropped from
        RESETGATE_TOKEN_KEYS too early): no link it could send would verify, and every other
        operation of that key would fail the same way. Pause the partition, naming the key,
        and hand the attempt back unspent."""
        reason = f"token key {kid!r} missing from RESETGATE_TOKEN_KEYS: add it back, then resume"
        await control.pause_partitions(self.client, [partition], reason)
        event(
            log,
            logging.ERROR,
            "token key missing; partition paused",
            kid=kid,
            partition=partition,
            operation_id=operation_id,
        )
        return Unsent("token_key_missing")


def _checked_recipient(account: Account, begun: Begun) -> Account | Unsent:
    """The directory's address, if it is one mailbox (shared.mailbox); else the operation
    fails naming the directory, and nothing is sent."""
    problem = mailbox.problem(account.email)
    if not problem:
        return account
    event(
        log,
        logging.ERROR,
        "directory address refused; not sent",
        problem=f"the directory's address {problem}",
        account_id=begun.account_id,
    )
    return Unsent("directory_address_invalid", failed=True)
