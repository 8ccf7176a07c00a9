"""One registry entry per provider kind: every part of a kind is found through its entry
(shared/providers/registry.py; docs/adding-a-provider.md), and nothing else lists the kinds.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import get_args

import aiohttp
import pytest

from services.poller.settings import InboundSettings
from services.sandbox.dialects import DIALECTS
from services.sandbox.settings import Mode
from shared.providers.base import EventModel
from shared.providers.kind import ProviderConfig
from shared.providers.registry import EVENT_CREDENTIAL, KINDS, build, entry, found_in, keyless
from shared.settings import ProviderKind, ProviderSettings

# kind: (adapter class, events, keyless, sandbox dialect, inbound decoder)
PARTS = {
    "http": ("HttpProvider", EventModel.POLL, False, "", ""),
    "mailgun": (
        "MailgunProvider",
        EventModel.WEBHOOK,
        True,
        "services.sandbox.dialects.mailgun",
        "services.poller.inbound.mailgun",
    ),
    "postmark": (
        "PostmarkProvider",
        EventModel.WEBHOOK,
        True,
        "services.sandbox.dialects.postmark",
        "services.poller.inbound.postmark",
    ),
    "sendgrid": (
        "SendGridProvider",
        EventModel.WEBHOOK,
        True,
        "services.sandbox.dialects.sendgrid",
        "services.poller.inbound.sendgrid",
    ),
    "ses": ("SesProvider", EventModel.QUEUE, True, "", "services.poller.inbound.ses"),
}


def _config(kind: str) -> ProviderConfig:
    return ProviderConfig(
        f"{kind}1",
        kind,
        "http://127.0.0.1:9",
        "key",
        1.0,
        2.0,
        key_retention_seconds=60.0,
        settle_seconds=5.0,
        mailgun_domain="mg.game.example",
        ses_region="eu-west-1",
    )


def test_the_registry_holds_every_kind_the_settings_accept() -> None:
    assert sorted(KINDS) == sorted(get_args(ProviderKind)) == sorted(PARTS)


@pytest.mark.parametrize("kind", sorted(PARTS))
async def test_each_kind_builds_its_adapter_with_the_capabilities_its_entry_declares(
    kind: str,
) -> None:
    adapter_class, events, is_keyless, _, _ = PARTS[kind]
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
    known = set(ProviderSettings.model_fields) | set(InboundSettings.model_fields)
    named = [
        s
        for s in entry(kind).settings
        if s not in known and not isinstance(getattr(ProviderSettings, s, None), property)
    ]
    assert entry(kind).settings and named == []
    credential = entry(kind).event_credential
    assert (
        (credential.lower() in InboundSettings.model_fields)
        if credential
        else (entry(kind).events is EventModel.POLL)
    )
    assert EVENT_CREDENTIAL.get(kind, "") == credential


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_each_kind_finds_its_sandbox_dialect_and_inbound_decoder_through_its_entry(
    kind: str,
) -> None:
    _, events, _, dialect, decoder = PARTS[kind]
    assert (entry(kind).sandbox_dialect, entry(kind).inbound_decoder) == (dialect, decoder)
    if dialect:
        assert DIALECTS[kind] is importlib.import_module(dialect).DIALECT
        assert kind in get_args(Mode)
    else:
        assert kind not in DIALECTS
    if decoder:
        module = importlib.import_module(decoder)
        assert callable(module.parse)
        assert callable(getattr(module, "receiver", None)) is (events is EventModel.WEBHOOK)


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
