"""Bad configuration stops a service at start with one line naming the variable.

The first example of each service runs ``python -m services.<name>`` as a process; the
others call the same ``main`` in the test's process, as a process each would cost a Python
start-up (about 1.7 CPU-s of imports) to test what one process per service already shows:
that ``main`` is the entry point and its line reaches stderr."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from tests.support.processes import START_TIMEOUT

SECRET = "do-not-echo-this-secret-value"
CLEARED = ("RESETGATE_", "AWS_REGION", "AWS_DEFAULT_REGION")
MAIN = {"sandbox": "services.sandbox.server"}  # the others: services.<name>.app

EXAMPLES = [
    ("sender", {"RESETGATE_TOKEN_KEYS": f"k1{SECRET}"}, "RESETGATE_TOKEN_KEYS"),
    ("sender", {"RESETGATE_TOKEN_KEYS": f"k1:{SECRET}"}, "RESETGATE_PROVIDER_API_KEY"),
    ("admission", {"RESETGATE_PARTITIONS": "zero"}, "RESETGATE_PARTITIONS"),
    (
        "poller",
        {
            "RESETGATE_TOKEN_TTL_SECONDS": "100",
            "RESETGATE_PROVIDER_API_KEY": "k",
            "RESETGATE_HORIZON_MARGIN_SECONDS": "200",
        },
        "RESETGATE_HORIZON_MARGIN_SECONDS",
    ),
    ("router", {"RESETGATE_LOG_LEVEL": "LOUD"}, "RESETGATE_LOG_LEVEL"),
    (
        "admission",
        {
            "RESETGATE_TOKEN_KEYS": f"k1:{SECRET}",
            "RESETGATE_INTERNAL_API_TOKEN": SECRET,
            "RESETGATE_HTTP_PORT": "9000",
            "RESETGATE_METRICS_PORT": "9000",
        },
        "RESETGATE_METRICS_PORT",
    ),
    (
        "sender",
        {"RESETGATE_TOKEN_KEYS": f"k1:{SECRET}", "RESETGATE_PROVIDER_KIND": "sendgrid"},
        "RESETGATE_PROVIDER_API_KEY",
    ),
    (
        "poller",
        {"RESETGATE_PROVIDER_KIND": "mailgun", "RESETGATE_PROVIDER_API_KEY": SECRET},
        "RESETGATE_MAILGUN_DOMAIN",
    ),
    (
        "sender",
        {"RESETGATE_TOKEN_KEYS": f"k1:{SECRET}", "RESETGATE_PROVIDER_KIND": "ses"},
        "AWS_REGION",
    ),
    ("poller", {"RESETGATE_PROVIDER_KIND": "smtp"}, "RESETGATE_PROVIDER_KIND"),
    (
        "sender",
        {
            "RESETGATE_TOKEN_KEYS": f"k1:{SECRET}",
            "RESETGATE_PROVIDERS": "a,b",
            "RESETGATE_PROVIDER_A_KIND": "http",
            "RESETGATE_PROVIDER_A_API_KEY": SECRET,
            "RESETGATE_PROVIDER_B_KIND": "smtp",
        },
        "RESETGATE_PROVIDER_B_KIND",
    ),
    (
        "poller",
        {
            "RESETGATE_PROVIDERS": "a",
            "RESETGATE_PROVIDER_A_KIND": "sendgrid",
            "RESETGATE_PROVIDER_A_URL": "http://127.0.0.1:1",
        },
        "RESETGATE_PROVIDER_A_API_KEY",
    ),
    ("router", {"RESETGATE_REDIS_SENTINELS": "s1:26379,s2"}, "RESETGATE_REDIS_SENTINELS"),
    (
        "router",
        {
            "RESETGATE_TOKEN_KEYS": f"k1:{SECRET}",
            "RESETGATE_REDIS_CLUSTER": "true",
            "RESETGATE_REDIS_SENTINELS": "s1:26379",
        },
        "RESETGATE_REDIS_CLUSTER",
    ),
    # The sandbox has a prefix of its own; `resetgate up` gives it the provider's kind.
    ("sandbox", {"RESETGATE_SANDBOX_MODE": "postmrk"}, "RESETGATE_SANDBOX_MODE"),
    ("sandbox", {"RESETGATE_SANDBOX_PORT": "http"}, "RESETGATE_SANDBOX_PORT"),
]
AS_PROCESS = {[e[0] for e in EXAMPLES].index(s) for s in {e[0] for e in EXAMPLES}}


@pytest.mark.timeout(2 * START_TIMEOUT)
@pytest.mark.parametrize(
    ("service", "env", "named", "as_process"),
    [(*example, i in AS_PROCESS) for i, example in enumerate(EXAMPLES)],
)
def test_invalid_settings_stop_the_service_with_one_clear_line(
    service: str,
    env: dict[str, str],
    named: str,
    as_process: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if as_process:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
        done = subprocess.run(
            [sys.executable, "-m", f"services.{service}"],
            env={**clean, **env},
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,  # a Python start-up: over 60 s at a load average of 30
            check=False,
        )
        code, stderr = done.returncode, done.stderr
    else:
        for name in [k for k in os.environ if k.startswith(CLEARED)]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        main = importlib.import_module(MAIN.get(service, f"services.{service}.app")).main
        with pytest.raises(SystemExit) as exited:
            main()
        code, stderr = exited.value.code, capsys.readouterr().err
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("invalid configuration:") and named in lines[0]
    assert "pydantic" not in lines[0]  # its "For further information visit" URL
    assert SECRET not in stderr


# A service class may give a shared variable its own default only where the default is the
# point: its operational port, and whether the token keys are required.
OWN_DEFAULTS = {"metrics_port", "token_keys"}


def test_every_shared_variable_is_declared_once() -> None:
    """Issue 17: the directory settings were declared three times with different checks, and
    the poller's provider call timeout drifted from the sender's (10 s vs 15 s)."""
    from services.admission.settings import AdmissionSettings
    from services.poller.settings import PollerSettings
    from services.router.settings import RouterSettings
    from services.sender.settings import SenderSettings
    from shared import settings

    mixins = [
        settings.RedisSettings,
        settings.ListenerSettings,
        settings.CommonSettings,
        settings.PolicySettings,
        settings.ProviderAccount,
        settings.ProviderSettings,
        settings.DirectorySettings,
        settings.ConsumerSettings,
    ]
    shared_fields = {name for mixin in mixins for name in mixin.__annotations__}
    for service in (AdmissionSettings, PollerSettings, RouterSettings, SenderSettings):
        redeclared = set(service.__annotations__) & shared_fields
        assert redeclared <= OWN_DEFAULTS, f"{service.__name__} redeclares {redeclared}"
    provider = (settings.ProviderAccount, settings.ProviderSettings)
    for name in {name for mixin in provider for name in mixin.__annotations__}:
        if name.startswith("_"):
            continue  # a private attribute (the account's kind settings), no variable
        assert (
            SenderSettings.model_fields[name].default == PollerSettings.model_fields[name].default
        ), name
