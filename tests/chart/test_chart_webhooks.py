"""The poller's webhook listener in the chart: its own Service, optional Ingress and a
NetworkPolicy admitting only the webhook port; the SES queue reader's settings. Nothing of it
renders unless asked for, and admission's port is never involved."""

from __future__ import annotations

from helmchart import Helm, deployments, env, name_of, of_kind

WEBHOOKS = {
    "webhooks.enabled": True,
    "webhooks.existingSecret": "resetgate-webhooks",
    "webhooks.sendgridPublicKey": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
}
NAME = name_of("poller") + "-webhooks"


def test_nothing_renders_by_default(helm: Helm) -> None:
    docs = helm.template()
    assert NAME not in {doc["metadata"]["name"] for doc in docs}
    assert not any(k.startswith("RESETGATE_WEBHOOK") for k in env(deployments(docs)["poller"]))


def test_service_selects_the_poller_on_the_webhook_port(helm: Helm) -> None:
    docs = helm.template(WEBHOOKS)
    service = of_kind(docs, "Service")[NAME]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "poller"
    assert service["spec"]["ports"] == [
        {"name": "webhooks", "port": 8085, "targetPort": 8085, "protocol": "TCP"}
    ]
    (poller_port,) = [
        p
        for p in deployments(docs)["poller"]["spec"]["template"]["spec"]["containers"][0]["ports"]
        if p["name"] == "webhooks"
    ]
    assert poller_port["containerPort"] == 8085
    admission = of_kind(docs, "Service")[name_of("admission")]
    ports = [p["port"] for p in admission["spec"]["ports"]]
    assert ports == [8080, 8081], "admission: its API and operational ports only"


def test_network_policy_admits_only_the_webhook_port(helm: Helm) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    policies = of_kind(
        helm.template({**WEBHOOKS, "webhooks.networkPolicy.from": [peer]}), "NetworkPolicy"
    )
    spec = policies[NAME]["spec"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "poller"
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [{"ports": [{"port": 8085, "protocol": "TCP"}], "from": [peer]}]


def test_optional_ingress_routes_webhooks_with_source_ranges(helm: Helm) -> None:
    docs = helm.template(
        {
            **WEBHOOKS,
            "webhooks.ingress.enabled": True,
            "webhooks.ingress.host": "hooks.game.example",
            "webhooks.ingress.sourceRanges": ["3.134.147.250/32", "50.31.156.0/24"],
        }
    )
    ingress = of_kind(docs, "Ingress")[NAME]
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/whitelist-source-range"] == (
        "3.134.147.250/32,50.31.156.0/24"
    )
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "hooks.game.example"
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["backend"]["service"]["name"]) == ("/webhooks", NAME)


def test_poller_env_carries_the_settings_and_optional_secret_refs(helm: Helm) -> None:
    docs = helm.template(
        {
            **WEBHOOKS,
            "sesEvents.queueUrl": "https://sqs.eu-west-1.amazonaws.com/1/q",
            "sesEvents.region": "eu-west-1",
        }
    )
    values = env(deployments(docs)["poller"])
    assert values["RESETGATE_WEBHOOK_PORT"] == "8085"
    assert values["RESETGATE_SES_QUEUE_URL"].endswith("/1/q")
    assert values["RESETGATE_AWS_REGION"] == "eu-west-1"
    ref = values["RESETGATE_MAILGUN_WEBHOOK_SIGNING_KEY"]["secretKeyRef"]
    assert ref == {
        "name": "resetgate-webhooks",
        "key": "mailgun-webhook-signing-key",
        "optional": True,
    }
    for other in ("admission", "sender", "router"):
        assert not any("WEBHOOK" in k or "SES" in k for k in env(deployments(docs)[other]))


def test_lint_strict_with_everything_on(helm: Helm) -> None:
    done = helm.lint(
        {
            **WEBHOOKS,
            "webhooks.ingress.enabled": True,
            "sesEvents.queueUrl": "q",
            "secrets.existingSecret": "s",
            "redis.url": "redis://r:6379/0",
        }
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_named_provider_has_its_own_webhook_credential_and_queue(helm: Helm) -> None:
    # Two SendGrid accounts, each with its own verification key (its own /webhooks/<name>),
    # a Mailgun account with its own signing key, and SES with its own queue.
    values = {
        **WEBHOOKS,
        "provider.awsRegion": "eu-west-1",
        "provider.named": [
            {
                "name": "primary",
                "kind": "sendgrid",
                "url": "https://api.sendgrid.com",
                "sendgridPublicKey": "S0VZLVBSSU1BUlk=",
            },
            {
                "name": "standby",
                "kind": "sendgrid",
                "url": "https://api.sendgrid.com",
                "sendgridPublicKey": "S0VZLVNUQU5EQlk=",
            },
            {
                "name": "backup",
                "kind": "mailgun",
                "url": "https://api.mailgun.net",
                "mailgunDomain": "mg.game.example",
            },
            {"name": "aws", "kind": "ses", "sesQueueUrl": "https://sqs.example/q"},
        ],
    }
    poller = env(deployments(helm.template(values))["poller"])
    assert poller["RESETGATE_PROVIDER_PRIMARY_SENDGRID_WEBHOOK_PUBLIC_KEY"] == "S0VZLVBSSU1BUlk="
    assert poller["RESETGATE_PROVIDER_STANDBY_SENDGRID_WEBHOOK_PUBLIC_KEY"] == "S0VZLVNUQU5EQlk="
    assert poller["RESETGATE_PROVIDER_BACKUP_MAILGUN_WEBHOOK_SIGNING_KEY"] == {
        "secretKeyRef": {
            "name": "resetgate-webhooks",
            "key": "provider-backup-mailgun-webhook-signing-key",
            "optional": True,
        }
    }
    assert poller["RESETGATE_PROVIDER_AWS_SES_QUEUE_URL"] == "https://sqs.example/q"
    assert "RESETGATE_PROVIDER_PRIMARY_MAILGUN_WEBHOOK_SIGNING_KEY" not in poller
    # The per-kind path of a single provider stays as it was.
    assert poller["RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY"] == WEBHOOKS["webhooks.sendgridPublicKey"]
