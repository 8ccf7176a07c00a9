"""Several providers configured at once (RESETGATE_PROVIDERS), and the one-line refusals."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.providers.kind import ProviderConfig
from shared.providers.mailgun import MailgunSettings
from shared.providers.named import (
    NAME,
    ProviderConfigError,
    load_providers,
    provider_names,
)
from shared.settings import ProviderSettings
from tests.conftest import TEST_TOKEN_KEYS


def base(**overrides: str) -> ProviderSettings:
    values = {"token_keys": TEST_TOKEN_KEYS, "provider_api_key": "single-key", **overrides}
    return ProviderSettings(**values)  # type: ignore[arg-type]


TWO = {
    "RESETGATE_PROVIDERS": "primary,standby",
    "RESETGATE_PROVIDER_PRIMARY_KIND": "sendgrid",
    "RESETGATE_PROVIDER_PRIMARY_URL": "http://127.0.0.1:1",
    "RESETGATE_PROVIDER_PRIMARY_API_KEY": "sg-key",
    "RESETGATE_PROVIDER_PRIMARY_MAX_RATE": "40",
    "RESETGATE_PROVIDER_STANDBY_KIND": "mailgun",
    "RESETGATE_PROVIDER_STANDBY_URL": "http://127.0.0.1:2",
    "RESETGATE_PROVIDER_STANDBY_API_KEY": "mg-key",
    "RESETGATE_PROVIDER_STANDBY_MAILGUN_DOMAIN": "mg.game.example",
}


def configured(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> list[ProviderConfig]:
    """The providers of a process whose environment holds ``env``, as a deployment sets it."""
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    return load_providers(base())


def test_each_name_gets_its_own_kind_url_key_and_rate_in_listed_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    primary, standby = configured(monkeypatch, TWO)
    assert (primary.name, primary.kind, primary.url) == (
        "primary",
        "sendgrid",
        "http://127.0.0.1:1",
    )
    assert primary.api_key == "sg-key" and primary.max_rate == 40.0
    assert (standby.name, standby.kind) == ("standby", "mailgun")
    assert standby.own(MailgunSettings).mailgun_domain == "mg.game.example"
    assert standby.max_rate is None


def test_without_the_list_the_single_provider_settings_define_one_provider() -> None:
    [only] = load_providers(base(provider_name="legacy"))
    assert (only.name, only.kind, only.max_rate) == ("legacy", "http", None)
    assert provider_names({}, fallback="legacy") == ["legacy"]


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"RESETGATE_PROVIDERS": "primary,Stand-by"}, "RESETGATE_PROVIDERS"),
        ({"RESETGATE_PROVIDERS": "primary,primary"}, "RESETGATE_PROVIDERS"),
        ({"RESETGATE_PROVIDER_STANDBY_KIND": "smtp"}, "RESETGATE_PROVIDER_STANDBY_KIND"),
        ({"RESETGATE_PROVIDER_PRIMARY_API_KEY": ""}, "RESETGATE_PROVIDER_PRIMARY_API_KEY"),
        (
            {"RESETGATE_PROVIDER_STANDBY_MAILGUN_DOMAIN": ""},
            "RESETGATE_PROVIDER_STANDBY_MAILGUN_DOMAIN",
        ),
        ({"RESETGATE_PROVIDER_PRIMARY_URL": ""}, "RESETGATE_PROVIDER_PRIMARY_URL"),
        ({"RESETGATE_PROVIDER_PRIMARY_MAX_RATE": "0"}, "RESETGATE_PROVIDER_PRIMARY_MAX_RATE"),
        ({"RESETGATE_PROVIDER_PRIMARY_MAX_RATE": "fast"}, "RESETGATE_PROVIDER_PRIMARY_MAX_RATE"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, change: dict[str, str], variable: str
) -> None:
    with pytest.raises(ProviderConfigError) as refused:
        configured(monkeypatch, {**TWO, **change})
    message = str(refused.value)
    assert message.startswith(variable + ":") and "\n" not in message
    assert "sg-key" not in message and "mg-key" not in message


@pytest.mark.parametrize("name", ["stand-by", "stand_by", "Standby"])
def test_the_single_provider_name_follows_the_listed_names_pattern(name: str) -> None:
    with pytest.raises(ValidationError, match="provider_name"):
        base(provider_name=name)
    assert not NAME.match(name)


def test_a_name_without_its_own_rate_or_events_delay_takes_the_process_wide_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The events delay is the mailgun kind's own setting (MailgunSettings.INHERITED).
    monkeypatch.setenv("RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS", "60")
    primary, standby = configured(monkeypatch, TWO)
    assert primary.max_rate == 40.0 and standby.max_rate is None
    assert standby.own(MailgunSettings).mailgun_events_delay_seconds == 60.0
    [_, standby] = configured(
        monkeypatch, {**TWO, "RESETGATE_PROVIDER_STANDBY_MAILGUN_EVENTS_DELAY_SECONDS": "5"}
    )
    assert standby.own(MailgunSettings).mailgun_events_delay_seconds == 5.0
    monkeypatch.delenv("RESETGATE_PROVIDER_STANDBY_MAILGUN_EVENTS_DELAY_SECONDS")
    monkeypatch.setenv("RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS", "-1")
    with pytest.raises(ProviderConfigError, match=r"^RESETGATE_MAILGUN_EVENTS_DELAY_SECONDS:"):
        configured(monkeypatch, TWO)


def test_each_prefix_reads_only_its_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # A named field's alias under the single prefix, and a single field's name under a
    # name's prefix, are nobody's variables.
    monkeypatch.setenv("RESETGATE_KIND", "sendgrid")
    monkeypatch.setenv("RESETGATE_PROVIDER_PRIMARY_PROVIDER_URL", "http://127.0.0.1:9")
    [only] = load_providers(base())
    assert only.kind == "http"
    primary, _ = configured(monkeypatch, TWO)
    assert primary.url == "http://127.0.0.1:1"
