"""Values: what they turn into, what the chart refuses, and that each one is documented."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helmchart import (
    BASE,
    CHART,
    CORE,
    Helm,
    config_data,
    deployments,
    env,
    name_of,
    of_kind,
)

SECRET_VALUES = {
    "secrets.providerApiKey": "pk",
    "secrets.tokenKeys": "k1:0123456789abcdef0123",
    "secrets.internalApiToken": "it",
}


# --- helm lint ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values_file", [None, "values-dev.yaml", "values-prod-like.yaml", "values-sentinel.yaml"]
)
def test_helm_lint_strict_passes(helm: Helm, values_file: str | None) -> None:
    files = [CHART / values_file] if values_file else []
    done = helm.lint({} if files else BASE, files)
    assert done.returncode == 0, done.stdout + done.stderr
    # helm lint logs a template's `fail` as INFO and still exits 0: look for it too.
    assert "Fail:" not in done.stdout + done.stderr


def test_helm_lint_strict_rejects_values_the_schema_forbids(helm: Helm) -> None:
    for bad in (
        {"keda.enabled": "yes"},
        {"config.partitions": 0},
        {"keda.combine": "avg"},
        {"terminationGracePeriodSeconds": 20},
        {"unknownTopLevelKey": 1},
    ):
        done = helm.lint({**BASE, **bad})
        assert done.returncode != 0, bad


# --- validateValues: refuse early, say what to set ----------------------------------------

REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "no-secrets": (
        {"redis.url": "redis://r:6379/0", "sandbox.enabled": True},
        "no secrets. Either set secrets.existingSecret",
    ),
    "half-the-secrets": (
        {**BASE, "secrets.existingSecret": "", "secrets.providerApiKey": "pk"},
        "no secrets. Either set secrets.existingSecret",
    ),
    "no-redis": (
        {"secrets.existingSecret": "s", "sandbox.enabled": True},
        "no Redis. Set redis.url (no password), or redis.existingSecret",
    ),
    "password-in-url": (
        {**BASE, "redis.url": "redis://:hunter2@r:6379/0"},
        "redis.url carries a password, which would land in a ConfigMap",
    ),
    "not-a-redis-url": ({**BASE, "redis.url": "http://r:6379"}, "must start with redis://"),
    "dev-redis-and-url": ({**BASE, "devRedis.enabled": True}, "Pick one Redis"),
    "dev-redis-cluster": (
        {**BASE, "redis.url": "", "devRedis.enabled": True, "redis.cluster": True},
        "devRedis is a single standalone Redis; it cannot serve redis.cluster=true",
    ),
    "dev-redis-wait": (
        {**BASE, "redis.url": "", "devRedis.enabled": True, "durability.waitReplicas": 1},
        "devRedis has no replicas",
    ),
    "dev-redis-everysec-keyless-provider": (
        {
            **BASE,
            "redis.url": "",
            "devRedis.enabled": True,
            "provider.kind": "postmark",
            "devRedis.args": ["--appendonly", "yes", "--appendfsync", "everysec"],
        },
        "provider.kind=postmark has no idempotency key, so the sender refuses a Redis without",
    ),
    "no-provider": (
        {**BASE, "provider.url": ""},
        "no email provider. Set provider.url, or sandbox.enabled=true",
    ),
    "real-provider-placeholder-link": (
        {**BASE, "config.resetUrlBase": ""},
        "set config.resetUrlBase (the link players click) and config.emailFrom",
    ),
    "mailgun-without-domain": (
        {**BASE, "provider.kind": "mailgun"},
        "provider.kind=mailgun needs provider.mailgunDomain",
    ),
    "ses-without-region": (
        {**BASE, "provider.kind": "ses"},
        "provider.kind=ses needs provider.awsRegion",
    ),
    "keda-and-hpa": (
        {**BASE, "keda.enabled": True, "sender.autoscaling.enabled": True},
        "Pick one: keda (stream lag) or sender.autoscaling (CPU)",
    ),
    "console-proxy-from-nowhere": (
        {**BASE, "console.enabled": True, "console.proxy.userHeader": "X-Forwarded-User"},
        "console.proxy.userHeader needs console.proxy.trustedProxies",
    ),
    "sentinel-and-cluster": (
        {**BASE, "redis.sentinel.sentinels": ["s-0:26379"], "redis.cluster": True},
        "redis.sentinel.sentinels and redis.cluster=true are both set",
    ),
    "sentinel-keyless-without-wait": (
        {**BASE, "redis.sentinel.sentinels": ["s-0:26379"], "provider.kind": "postmark"},
        "so the sender refuses durability.waitReplicas=0",
    ),
    "keda-blind": (
        {**BASE, "redis.url": "", "redis.existingSecret": "r", "keda.enabled": True},
        "set keda.redis.address (host:port)",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_validate_values_refuses_with_a_clear_message(helm: Helm, case: str) -> None:
    values, message = REFUSED[case]
    flat = " ".join(helm.template_error(values).split())
    assert "VALUES VALIDATION:" in flat
    assert message in flat
    # helm lint reports the same message (it logs template failures instead of exiting).
    linted = helm.lint(values)
    assert message in " ".join((linted.stdout + linted.stderr).split())


def test_every_problem_is_reported_in_one_run(helm: Helm) -> None:
    flat = " ".join(helm.template_error({}).split())
    for message in ("no secrets.", "no Redis.", "no email provider."):
        assert message in flat


# --- what the values become ----------------------------------------------------------------


def test_secrets_come_from_the_existing_secret_per_service(helm: Helm) -> None:
    docs = helm.template()
    assert not of_kind(docs, "Secret")
    wanted = {
        "admission": {"RESETGATE_TOKEN_KEYS", "RESETGATE_INTERNAL_API_TOKEN"},
        "sender": {"RESETGATE_TOKEN_KEYS", "RESETGATE_PROVIDER_API_KEY"},
        "poller": {"RESETGATE_PROVIDER_API_KEY"},
        "router": {"RESETGATE_TOKEN_KEYS"},
    }
    for component, deployment in deployments(docs).items():
        secret_env = {k: v for k, v in env(deployment).items() if isinstance(v, dict)}
        assert set(secret_env) == wanted[component]
        assert all(v["secretKeyRef"]["name"] == "resetgate-secrets" for v in secret_env.values())


def test_the_chart_creates_the_secret_from_values(helm: Helm) -> None:
    docs = helm.template({"secrets.existingSecret": "", **SECRET_VALUES})
    (secret,) = of_kind(docs, "Secret").values()
    assert set(secret["data"]) == {"provider-api-key", "token-keys", "internal-api-token"}
    refs = {
        v["secretKeyRef"]["name"]
        for d in deployments(docs).values()
        for v in env(d).values()
        if isinstance(v, dict)
    }
    assert refs == {secret["metadata"]["name"]}
    assert "secret" not in json.dumps(config_data(docs)).lower()


def test_settings_reach_every_service_through_the_configmap(helm: Helm) -> None:
    docs = helm.template(
        {
            "durability.waitReplicas": 2,
            "durability.waitTimeoutMs": 250,
            "redis.cluster": True,
            "config.partitions": 32,
            "config.trustedProxyHops": 1,
        }
    )
    data = config_data(docs)
    assert data["RESETGATE_WAIT_REPLICAS"] == "2"
    assert data["RESETGATE_WAIT_TIMEOUT_MS"] == "250"
    assert data["RESETGATE_KEYLESS_REQUIRE_FSYNC_ALWAYS"] == "true"
    assert data["RESETGATE_REDIS_CLUSTER"] == "true"
    assert data["RESETGATE_PARTITIONS"] == "32"
    assert data["RESETGATE_REDIS_URL"] == BASE["redis.url"]
    assert data["RESETGATE_HTTP_PORT"] == "8080"
    assert data["RESETGATE_METRICS_PORT"] == "8081"
    assert data["RESETGATE_TRUSTED_PROXY_HOPS"] == "1"
    assert data["RESETGATE_RESET_URL_BASE"] == BASE["config.resetUrlBase"]
    # null and empty values are left to the services' own defaults
    assert "RESETGATE_PROVIDER_MAX_RATE" not in data
    assert "RESETGATE_DIRECTORY_URL" not in data
    for component in CORE:
        from_ = deployments(docs)[component]["spec"]["template"]["spec"]["containers"][0]
        assert from_["envFrom"] == [{"configMapRef": {"name": "rg-resetgate"}}]


def test_sentinel_settings_reach_every_service(helm: Helm) -> None:
    sentinels = ["redis-node-0.redis-headless:26379", "redis-node-1.redis-headless:26379"]
    docs = helm.template(
        {
            "redis.url": "",
            "redis.existingSecret": "redis-url",
            "redis.sentinel.sentinels": sentinels,
            "redis.sentinel.tls": True,
            "redis.sentinel.masterName": "primary",
            "redis.sentinel.existingSecret": "sentinel-auth",
            "networkPolicy.enabled": True,
        }
    )
    data = config_data(docs)
    assert data["RESETGATE_REDIS_SENTINELS"] == ",".join(sentinels)
    assert data["RESETGATE_REDIS_SENTINEL_MASTER"] == "primary"
    assert data["RESETGATE_REDIS_SENTINEL_TLS"] == "true"
    assert data["RESETGATE_KEYLESS_REQUIRE_REPLICA_WAIT"] == "true"
    for component in CORE:
        ref = env(deployments(docs)[component])["RESETGATE_REDIS_SENTINEL_PASSWORD"]
        assert ref["secretKeyRef"] == {"name": "sentinel-auth", "key": "sentinel-password"}
    policies = of_kind(docs, "NetworkPolicy").values()
    egress = [rule for p in policies for rule in p["spec"].get("egress", [])]
    ports = {port["port"] for rule in egress for port in rule.get("ports", [])}
    assert {6379, 26379} <= ports


def test_without_sentinels_nothing_of_sentinel_is_rendered(helm: Helm) -> None:
    data = config_data(helm.template())
    assert not [name for name in data if "SENTINEL" in name]


def test_a_redis_url_with_a_password_comes_from_its_secret(helm: Helm) -> None:
    docs = helm.template({"redis.url": "", "redis.existingSecret": "redis-url-secret"})
    assert "RESETGATE_REDIS_URL" not in config_data(docs)
    for component in CORE:
        ref = env(deployments(docs)[component])["RESETGATE_REDIS_URL"]["secretKeyRef"]
        assert ref == {"name": "redis-url-secret", "key": "redis-url"}


def test_pods_restart_when_their_settings_change(helm: Helm) -> None:
    def checksum(values: dict[str, Any]) -> str:
        pod = deployments(helm.template(values))["sender"]["spec"]["template"]
        return str(pod["metadata"]["annotations"]["checksum/config"])

    assert checksum({}) != checksum({"config.maxAttempts": 7})


@pytest.mark.parametrize(
    ("values", "renders"),
    [
        ({"provider.kind": "postmark"}, True),  # the default devRedis.args fsync always
        (
            {
                "provider.kind": "postmark",
                "durability.keylessRequireFsyncAlways": False,
                "devRedis.args": ["--appendonly", "yes", "--appendfsync", "everysec"],
            },
            True,
        ),
        (
            {
                "provider.kind": "http",
                "devRedis.args": ["--appendonly", "yes", "--appendfsync", "everysec"],
            },
            True,
        ),
        (
            {
                "provider.kind": "sendgrid",
                "devRedis.args": ["--appendonly", "no", "--appendfsync", "always"],
            },
            False,
        ),
    ],
)
def test_dev_redis_keeps_every_write_a_keyless_provider_relies_on(
    helm: Helm, values: dict[str, object], renders: bool
) -> None:
    chosen = {"redis.url": "", "devRedis.enabled": True, **values}
    if renders:
        assert helm.template(chosen)
    else:
        assert "has no idempotency key" in " ".join(helm.template_error(chosen).split())


def test_sandbox_is_off_by_default(helm: Helm) -> None:
    assert "sandbox" not in deployments(helm.template())


def test_sandbox_provider_runs_when_enabled(helm: Helm) -> None:
    docs = helm.template({"sandbox.enabled": True, "provider.url": ""})
    sandbox = env(deployments(docs)["sandbox"])
    assert sandbox["RESETGATE_SANDBOX_PORT"] == "8080"
    assert sandbox["RESETGATE_SANDBOX_HOST"] == "0.0.0.0"
    # the sandbox accepts exactly the key the sender and poller present
    assert (
        sandbox["RESETGATE_SANDBOX_API_KEY"]
        == env(deployments(docs)["sender"])["RESETGATE_PROVIDER_API_KEY"]
    )
    assert config_data(docs)["RESETGATE_PROVIDER_URL"] == f"http://{name_of('sandbox')}:8080"
    assert name_of("sandbox") in of_kind(docs, "Service")


@pytest.mark.parametrize("kind", ["sendgrid", "postmark", "mailgun"])
def test_the_sandbox_answers_as_the_chosen_provider(helm: Helm, kind: str) -> None:
    docs = helm.template(
        {
            "sandbox.enabled": True,
            "provider.url": "",
            "provider.kind": kind,
            "provider.mailgunDomain": "mg.game.example",
        }
    )
    assert env(deployments(docs)["sandbox"])["RESETGATE_SANDBOX_MODE"] == kind
    data = config_data(docs)
    assert data["RESETGATE_PROVIDER_KIND"] == kind
    assert data["RESETGATE_PROVIDER_URL"] == f"http://{name_of('sandbox')}:8080"


def test_ses_uses_the_region_endpoint_not_the_sandbox(helm: Helm) -> None:
    docs = helm.template(
        {
            "sandbox.enabled": True,
            "provider.url": "",
            "provider.kind": "ses",
            "provider.awsRegion": "eu-west-1",
        }
    )
    data = config_data(docs)
    assert (data["RESETGATE_PROVIDER_KIND"], data["AWS_REGION"]) == ("ses", "eu-west-1")
    assert "RESETGATE_PROVIDER_URL" not in data


def test_ses_configuration_set_reaches_every_service(helm: Helm) -> None:
    docs = helm.template(
        {
            "provider.kind": "ses",
            "provider.awsRegion": "eu-west-1",
            "provider.sesConfigurationSet": "resetgate-events",
        }
    )
    assert config_data(docs)["RESETGATE_SES_CONFIGURATION_SET"] == "resetgate-events"
    unset = config_data(helm.template({"provider.kind": "ses", "provider.awsRegion": "eu-west-1"}))
    assert "RESETGATE_SES_CONFIGURATION_SET" not in unset


def test_the_refusals_guard_is_set_only_when_given(helm: Helm) -> None:
    data = config_data(
        helm.template({"config.refusalGuardOperations": 0, "config.refusalGuardWindowSeconds": 60})
    )
    assert (
        data["RESETGATE_REFUSAL_GUARD_OPERATIONS"],
        data["RESETGATE_REFUSAL_GUARD_WINDOW_SECONDS"],
    ) == ("0", "60")
    assert "RESETGATE_REFUSAL_GUARD_OPERATIONS" not in config_data(helm.template({}))


def test_dev_redis_serves_the_release(helm: Helm) -> None:
    docs = helm.template({"redis.url": "", "devRedis.enabled": True})
    assert config_data(docs)["RESETGATE_REDIS_URL"] == f"redis://{name_of('redis')}:6379/0"
    redis = deployments(docs)["redis"]
    assert redis["spec"]["replicas"] == 1
    assert redis["spec"]["strategy"] == {"type": "Recreate"}


# --- every value documented ------------------------------------------------------------------


def value_paths(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in node.items():
        path = f"{prefix}{key}"
        yield path, value
        if isinstance(value, dict) and value:
            yield from value_paths(value, f"{path}.")


def test_every_value_has_a_param_comment() -> None:
    text = (CHART / "values.yaml").read_text()
    params = dict(re.findall(r"^\s*## @param (\S+)( \[(?:object|array)\])?", text, re.M))
    paths = dict(value_paths(yaml.safe_load(text)))
    # [object]/[array] params document a whole default in one line (readme-generator style)
    whole = [p for p, modifier in params.items() if modifier]
    covered = {p for p in paths if any(p.startswith(w + ".") for w in whole)}
    leaves = {p for p, v in paths.items() if not (isinstance(v, dict) and v)}
    assert leaves - covered - set(params) == set(), "values without ## @param"
    assert set(params) - set(paths) == set(), "## @param for values that do not exist"


def test_the_schema_knows_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["additionalProperties"] is False
    assert set(values) == set(schema["properties"])


NOTES_PROBE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ tpl (.Files.Get "notes.src") . | quote }}
"""


@pytest.mark.parametrize("values_file", ["values-dev.yaml", "values-prod-like.yaml"])
def test_install_notes_render(helm: Helm, tmp_path: Path, values_file: str) -> None:
    # helm template never renders NOTES.txt and install needs a cluster, so render a copy
    # of it through tpl in a scratch copy of the chart: a broken NOTES breaks every install.
    chart = tmp_path / "resetgate"
    shutil.copytree(CHART, chart)
    (chart / "notes.src").write_text((CHART / "templates" / "NOTES.txt").read_text())
    (chart / "templates" / "notes-probe.yaml").write_text(NOTES_PROBE)
    done = helm.run(
        "template",
        "rg",
        str(chart),
        "-f",
        str(chart / values_file),
        "--show-only",
        "templates/notes-probe.yaml",
    )
    assert done.returncode == 0, done.stderr
    notes = yaml.safe_load(done.stdout)["data"]["notes"]
    assert "port-forward svc/rg-resetgate-admission 8080:8080" in notes
    assert ("DEV ONLY" in notes) == (values_file == "values-dev.yaml")


# --- several providers (provider.named) ----------------------------------------------------

NAMED = {
    "provider.named": [
        {"name": "primary", "kind": "sendgrid", "url": "https://api.sendgrid.com", "maxRate": 80},
        {
            "name": "standby",
            "kind": "mailgun",
            "url": "https://api.mailgun.net",
            "mailgunDomain": "mg.game.example",
        },
        {"name": "aws", "kind": "ses"},
    ],
    "provider.awsRegion": "eu-west-1",
}


def test_named_providers_reach_the_services_as_resetgate_providers(helm: Helm) -> None:
    data = config_data(helm.template(NAMED))
    assert data["RESETGATE_PROVIDERS"] == "primary,standby,aws"
    assert data["RESETGATE_PROVIDER_PRIMARY_KIND"] == "sendgrid"
    assert data["RESETGATE_PROVIDER_PRIMARY_URL"] == "https://api.sendgrid.com"
    assert data["RESETGATE_PROVIDER_PRIMARY_MAX_RATE"] == "80"
    assert data["RESETGATE_PROVIDER_STANDBY_MAILGUN_DOMAIN"] == "mg.game.example"
    assert data["RESETGATE_PROVIDER_AWS_KIND"] == "ses"
    assert "RESETGATE_PROVIDER_AWS_URL" not in data  # the region's endpoint
    assert "RESETGATE_PROVIDER_STANDBY_MAX_RATE" not in data  # provider.maxRate applies
    assert "API_KEY" not in " ".join(data)


def test_named_provider_keys_reach_only_the_sender_and_the_poller(helm: Helm) -> None:
    docs = helm.template(NAMED)
    named = {
        "RESETGATE_PROVIDER_PRIMARY_API_KEY": "provider-primary-api-key",
        "RESETGATE_PROVIDER_STANDBY_API_KEY": "provider-standby-api-key",
    }
    for component, deployment in deployments(docs).items():
        refs = {
            k: v["secretKeyRef"]["key"]
            for k, v in env(deployment).items()
            if isinstance(v, dict)
            and k.startswith("RESETGATE_PROVIDER_")
            and k != "RESETGATE_PROVIDER_API_KEY"
        }
        assert refs == (named if component in ("sender", "poller") else {}), component


def test_the_chart_stores_each_named_providers_key_when_it_creates_the_secret(
    helm: Helm,
) -> None:
    keys = {"primary": "sg-key", "standby": "mg-key"}
    docs = helm.template(
        {
            **NAMED,
            "secrets.existingSecret": "",
            **SECRET_VALUES,
            "secrets.namedProviderApiKeys": keys,
        }
    )
    (secret,) = of_kind(docs, "Secret").values()
    assert secret["data"]["provider-primary-api-key"] == base64.b64encode(b"sg-key").decode()
    assert secret["data"]["provider-standby-api-key"] == base64.b64encode(b"mg-key").decode()
    assert "provider-aws-api-key" not in secret["data"]


def test_the_failover_policy_reaches_the_senders_only_where_set(helm: Helm) -> None:
    listed: list[dict[str, Any]] = NAMED["provider.named"]  # type: ignore[assignment]
    named = [{**listed[0], "failoverTo": "standby"}, *listed[1:]]
    data = config_data(
        helm.template({**NAMED, "provider.named": named, "config.failoverAfterSeconds": 600})
    )
    assert data["RESETGATE_FAILOVER_PRIMARY"] == "standby"
    assert data["RESETGATE_FAILOVER_AFTER_SECONDS"] == "600"
    assert "RESETGATE_FAILOVER_STANDBY" not in data and "RESETGATE_FAILOVER_AWS" not in data
    plain = config_data(helm.template(NAMED))  # off unless asked
    assert not [k for k in plain if k.startswith("RESETGATE_FAILOVER_")]


def test_named_providers_default_to_the_in_chart_sandbox(helm: Helm) -> None:
    named = [{"name": "a", "kind": "http"}, {"name": "b", "kind": "http"}]
    values = {"provider.url": "", "sandbox.enabled": True, "provider.named": named}
    data = config_data(helm.template(values))
    assert data["RESETGATE_PROVIDER_A_URL"] == data["RESETGATE_PROVIDER_URL"]
    assert data["RESETGATE_PROVIDER_B_URL"].startswith("http://rg-resetgate-sandbox:")


@pytest.mark.parametrize(
    ("named", "message"),
    [
        ([{"name": "a", "kind": "http", "url": "https://x"}] * 2, "lists a twice"),
        ([{"name": "m", "kind": "mailgun", "url": "https://x"}], "m (mailgun) needs mailgunDomain"),
        ([{"name": "h", "kind": "http"}], "h has no url"),
        (
            [{"name": "a", "kind": "http", "url": "https://x", "failoverTo": "b"}],
            'a fails over to "b": name another provider.named entry',
        ),
        (
            [{"name": "a", "kind": "http", "url": "https://x", "failoverTo": "a"}],
            'a fails over to "a"',
        ),
    ],
)
def test_named_providers_are_refused_with_a_clear_message(
    helm: Helm, named: list[dict[str, str]], message: str
) -> None:
    flat = " ".join(helm.template_error({"provider.named": named}).split())
    assert "VALUES VALIDATION:" in flat and message in flat


def test_a_named_provider_without_its_key_is_refused_when_the_chart_makes_the_secret(
    helm: Helm,
) -> None:
    values = {**NAMED, "secrets.existingSecret": "", **SECRET_VALUES}
    flat = " ".join(helm.template_error(values).split())
    assert "primary has no API key: set secrets.namedProviderApiKeys.primary" in flat
    assert "aws has no API key" not in flat


def test_the_schema_refuses_a_provider_name_the_services_would_refuse(helm: Helm) -> None:
    for name in ("Primary", "stand-by", ""):
        done = helm.lint({**BASE, "provider.named": [{"name": name, "kind": "http"}]})
        assert done.returncode != 0, name


def test_otel_settings_reach_every_service_and_only_otel_names_are_accepted(helm: Helm) -> None:
    endpoint = "http://otel-collector.monitoring:4318"
    otel = {
        "tracing.otel.OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "tracing.otel.OTEL_TRACES_SAMPLER": "always_on",
    }
    data = config_data(helm.template(otel))
    assert data["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint
    assert data["OTEL_TRACES_SAMPLER"] == "always_on"
    # Unset (the default), nothing of OpenTelemetry is rendered: traces stay off.
    assert not [name for name in config_data(helm.template()) if name.startswith("OTEL_")]
    # The map is for OTEL_* only: a RESETGATE_ setting there would bypass config's checks.
    error = helm.template_error({**BASE, "tracing.otel.RESETGATE_PARTITIONS": "1"})
    assert "tracing.otel" in error
