"""One registry entry per provider kind: every part of a kind is found through its entry
(shared/providers/registry.py; docs/adding-a-provider.md), and nothing else lists the kinds.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import aiohttp
import pytest
from pydantic import ValidationError

from services.poller.settings import PollerSettings
from services.sandbox.dialects import DIALECTS
from services.sandbox.settings import MODES, SandboxSettings
from services.sender.settings import SenderSettings
from shared.emails.compose import hosted_problem
from shared.preflight.run import checks_of
from shared.providers import http
from shared.providers.base import EventModel
from shared.providers.kind import Kind, ProviderConfig
from shared.providers.registry import EVENT_CREDENTIAL, KINDS, build, entry, found_in, keyless
from shared.settings import KindSettings, ProviderAccount

# kind: (adapter class, events, keyless, sandbox dialect, inbound decoder, preflight, hosts
# templates, its own settings class: the variables only its account reads, its inbound
# settings class: what the poller reads its pushed events with; both declared in its module)
PARTS = {
    "http": (
        "HttpProvider",
        EventModel.POLL,
        False,
        "",
        "",
        "shared.preflight.keyed:contract",
        False,
        "KindSettings",
        "KindSettings",
    ),
    "mailgun": (
        "MailgunProvider",
        EventModel.WEBHOOK,
        True,
        "services.sandbox.dialects.mailgun",
        "services.poller.inbound.mailgun",
        "shared.preflight.keyed:mailgun",
        True,
        "MailgunSettings",
        "MailgunInbound",
    ),
    "postmark": (
        "PostmarkProvider",
        EventModel.WEBHOOK,
        True,
        "services.sandbox.dialects.postmark",
        "services.poller.inbound.postmark",
        "shared.preflight.keyed:postmark",
        True,
        "KindSettings",
        "PostmarkInbound",
    ),
    "sendgrid": (
        "SendGridProvider",
        EventModel.WEBHOOK,
        True,
        "services.sandbox.dialects.sendgrid",
        "services.poller.inbound.sendgrid",
        "shared.preflight.keyed:sendgrid",
        True,
        "KindSettings",
        "SendGridInbound",
    ),
    "ses": (
        "SesProvider",
        EventModel.QUEUE,
        True,
        "",
        "services.poller.inbound.ses",
        "shared.preflight.ses:checks",
        True,
        "SesSettings",
        "SesInbound",
    ),
}
# The variables (after the prefix, RESETGATE_ or a configured name's
# RESETGATE_PROVIDER_<NAME>_) each pushed kind's events are read with: the chart and the docs
# set them, so a class that moves or renames a field must keep them.
INBOUND_VARIABLES = {
    "http": [],
    "mailgun": ["MAILGUN_WEBHOOK_SIGNING_KEY"],
    "postmark": [
        "POSTMARK_WEBHOOK_USERNAME",
        "POSTMARK_WEBHOOK_PASSWORD",
        "POSTMARK_WEBHOOK_NETWORKS",
    ],
    "sendgrid": ["SENDGRID_WEBHOOK_PUBLIC_KEY"],
    "ses": [
        "SES_QUEUE_URL",
        "SES_DEAD_LETTER_QUEUE_URL",
        "SES_WAIT_SECONDS",
        "AWS_REGION",
        "AWS_ENDPOINT_URL",
    ],
}
# What an account of each kind lacks when nothing but its kind is set: the kind's entry says
# (Kind.lacks), and ProviderAccount refuses to load with it.
LACKS = {
    "http": "RESETGATE_PROVIDER_API_KEY: required for kind http",
    "mailgun": "RESETGATE_PROVIDER_API_KEY: required for kind mailgun",
    "postmark": "RESETGATE_PROVIDER_API_KEY: required for kind postmark",
    "sendgrid": "RESETGATE_PROVIDER_API_KEY: required for kind sendgrid",
    "ses": "AWS_REGION: required for kind ses (or AWS_DEFAULT_REGION)",
}


def missing_parts(kind: Kind) -> list[str]:
    """Each part ``kind``'s entry names that is not there (the services' settings fields, the
    event credential's field, the sandbox dialect and its mode, the inbound decoder, the
    preflight), and its settings classes (its account's, its events') when another module
    declares them."""
    known = settings_fields()
    missing = [f"settings field {s}" for s in kind.service_settings if s not in known]
    for part, cls in (("settings", kind.settings), ("inbound settings", kind.inbound_settings)):
        home = cls.__module__
        if cls is not KindSettings and home != f"shared.providers.{kind.name}":
            missing.append(f"{part} class {cls.__name__} in {home}")
    credential = kind.event_credential.lower()
    if credential and credential not in kind.inbound_settings.model_fields:
        missing.append(f"inbound settings field {credential}")
    if kind.sandbox_dialect and not hasattr(_module(kind.sandbox_dialect), "DIALECT"):
        missing.append(f"sandbox dialect {kind.sandbox_dialect}")
    if kind.sandbox_dialect and kind.name not in MODES:
        missing.append(f"sandbox mode {kind.name}")
    decoder = _module(kind.inbound_decoder) if kind.inbound_decoder else None
    if kind.inbound_decoder and not callable(getattr(decoder, "parse", None)):
        missing.append(f"inbound decoder {kind.inbound_decoder}")
    module, _, function = kind.preflight.partition(":")
    if not callable(getattr(_module(module), function, None)):
        missing.append(f"preflight {kind.preflight}")
    return missing


def settings_fields() -> set[str]:
    """Every field of the services that talk to a provider (the sender's and the poller's,
    ProviderSettings among them)."""
    return set(SenderSettings.model_fields) | set(PollerSettings.model_fields)


def kind_fields(kind: Kind) -> set[str]:
    """The fields of a kind's own classes: its account's and its events'."""
    return set(kind.settings.model_fields) | set(kind.inbound_settings.model_fields)


def _module(name: str) -> object:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _config(kind: str) -> ProviderConfig:
    own = {"mailgun_domain": "mg.game.example", "ses_region": "eu-west-1"}
    settings = entry(kind).settings
    return ProviderConfig(
        f"{kind}1",
        kind,
        "http://127.0.0.1:9",
        "key",
        1.0,
        2.0,
        key_retention_seconds=60.0,
        settle_seconds=5.0,
        kind_settings=settings(**{k: v for k, v in own.items() if k in settings.model_fields}),
    )


def test_the_registry_holds_every_kind_the_settings_accept() -> None:
    assert sorted(KINDS) == sorted(PARTS)
    with pytest.raises(ValidationError, match="Input should be 'http', 'mailgun'"):
        ProviderAccount(provider_kind="pigeon", provider_url="u", provider_api_key="k")


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_each_kind_has_every_part_its_entry_names(kind: str) -> None:
    assert missing_parts(entry(kind)) == []


def test_a_part_an_entry_names_that_is_not_there_is_listed() -> None:
    # The opposite failure: a kind whose settings, decoder, dialect or checks were never
    # written is caught here, not at a user's first send.
    class PigeonSettings(KindSettings):
        pigeon_region: str = ""

    class PigeonInbound(KindSettings):
        """Declared outside the kind's module, without the credential its entry names."""

    pigeon = Kind(
        "pigeon",
        http.KIND.adapter,
        http.KIND.capabilities,
        settings=PigeonSettings,
        inbound_settings=PigeonInbound,
        service_settings=("pigeon_region",),
        event_credential="PIGEON_WEBHOOK_SECRET",
        sandbox_dialect="services.sandbox.dialects.pigeon",
        inbound_decoder="services.poller.inbound.pigeon",
        preflight="shared.preflight.keyed:pigeon",
    )
    assert missing_parts(pigeon) == [
        "settings field pigeon_region",
        f"settings class PigeonSettings in {__name__}",
        f"inbound settings class PigeonInbound in {__name__}",
        "inbound settings field pigeon_webhook_secret",
        "sandbox dialect services.sandbox.dialects.pigeon",
        "sandbox mode pigeon",
        "inbound decoder services.poller.inbound.pigeon",
        "preflight shared.preflight.keyed:pigeon",
    ]


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_each_kind_says_what_its_account_lacks(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION", "RESETGATE_PROVIDERS"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ValidationError, match=LACKS[kind].replace("(", r"\(").replace(")", r"\)")):
        ProviderAccount(provider_kind=kind, provider_url="" if kind == "ses" else "u")


@pytest.mark.parametrize("kind", sorted(PARTS))
async def test_each_kind_builds_its_adapter_with_the_capabilities_its_entry_declares(
    kind: str,
) -> None:
    adapter_class, events, is_keyless, *_ = PARTS[kind]
    config = _config(kind)
    async with aiohttp.ClientSession() as session:
        adapter = build(config, session)
        assert type(adapter).__name__ == adapter_class and adapter.name == f"{kind}1"
        assert adapter.capabilities == entry(kind).capabilities(config)
        assert adapter.capabilities.events is events is entry(kind).events
        assert keyless(kind) is is_keyless is not adapter.capabilities.native_key
        if hasattr(adapter, "aclose"):
            await adapter.aclose()


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_each_kind_names_settings_that_exist(kind: str) -> None:
    known = settings_fields()
    assert [s for s in entry(kind).service_settings if s not in known] == []
    assert entry(kind).settings.__name__ == PARTS[kind][7]
    inbound = entry(kind).inbound_settings
    assert inbound.__name__ == PARTS[kind][8]
    assert [field.upper() for field in inbound.model_fields] == INBOUND_VARIABLES[kind]
    credential = entry(kind).event_credential
    assert (
        (credential.lower() in inbound.model_fields)
        if credential
        else (entry(kind).events is EventModel.POLL and inbound is KindSettings)
    )
    assert EVENT_CREDENTIAL.get(kind, "") == credential


def test_every_setting_named_after_a_kind_is_in_its_entry() -> None:
    # The opposite direction: a field named after one kind that its entry does not list is a
    # part of the kind that adding or removing it through the registry would miss. (Only a
    # vendor's kind: `http` is resetgate's own contract, and `http_host` the listener's.)
    # Its own classes hold each such field (its account's, its events'); a service's settings
    # class none of them, nor another kind's classes.
    fields = settings_fields() | {f for k in KINDS.values() for f in kind_fields(k)}
    unlisted = [
        f"{field} ({kind})"
        for field in sorted(fields)
        for kind in KINDS
        if entry(kind).vendor
        and field.startswith(f"{kind}_")
        and field not in kind_fields(entry(kind))
        and field not in entry(kind).service_settings
    ]
    assert unlisted == []
    declared_twice = [
        f"{field} ({kind.name})"
        for kind in KINDS.values()
        for field in sorted(kind_fields(kind))
        if field in settings_fields()
        or any(field in kind_fields(other) for other in KINDS.values() if other is not kind)
        or (field in kind.settings.model_fields and field in kind.inbound_settings.model_fields)
    ]
    assert declared_twice == []


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_each_kind_finds_its_sandbox_dialect_and_inbound_decoder_through_its_entry(
    kind: str,
) -> None:
    _, events, _, dialect, decoder, preflight, *_ = PARTS[kind]
    assert (entry(kind).sandbox_dialect, entry(kind).inbound_decoder) == (dialect, decoder)
    assert entry(kind).preflight == preflight and callable(checks_of(kind))
    if dialect:
        assert DIALECTS[kind] is importlib.import_module(dialect).DIALECT
        assert SandboxSettings(mode=kind).mode == kind
    else:
        assert kind not in DIALECTS and (kind in MODES) is (kind == "http")  # its own routes
    if decoder:
        module = importlib.import_module(decoder)
        assert callable(module.parse)
        assert callable(getattr(module, "receiver", None)) is (events is EventModel.WEBHOOK)


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_hosted_template_is_accepted_for_the_kinds_whose_entry_hosts_them(kind: str) -> None:
    hosts = PARTS[kind][6]
    assert entry(kind).hosts_templates is hosts
    problem = hosted_problem(kind, "reset-{locale}", "RESETGATE_PROVIDER_TEMPLATE")
    assert (problem == "") is hosts
    if not hosts:
        assert problem.endswith("(mailgun, postmark, sendgrid, ses do)")


def test_a_kind_is_found_from_its_own_module(tmp_path: Path) -> None:
    # The opposite failure: a module dropped into the folder is a kind without being listed
    # anywhere, and a module without a KIND (base, named) is none.
    package = tmp_path / "extrakinds"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("VALUE = 1\n")
    (package / "pigeon.py").write_text(
        "from shared.providers import http\n"
        "from shared.providers.kind import Kind\n"
        "KIND = Kind('pigeon', http.KIND.adapter, http.KIND.capabilities)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        found = found_in(importlib.import_module("extrakinds"))
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.split(".")[0] == "extrakinds"]:
            del sys.modules[name]
    assert list(found) == ["pigeon"] and not found["pigeon"].keyless
