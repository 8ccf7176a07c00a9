"""The reset email in the chart: the studio's templates as a ConfigMap mounted on the
senders only, a checksum that rolls them when a file changes, the layout the sender's
loader reads (rebuilt here from the rendered objects and checked as the sender checks it),
brands and provider-hosted templates as settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helmchart import BASE, Helm, deployments, of_kind

from shared.emails.check import check
from shared.emails.compose import Mailer
from shared.emails.files import DEFAULTS, Templates
from shared.settings import EmailSettings

MOUNT = "/etc/resetgate/templates"


def shipped() -> dict[str, str]:
    return {
        str(p.relative_to(DEFAULTS)): p.read_text(encoding="utf-8")
        for p in sorted(DEFAULTS.rglob("*"))
        if p.is_file()
    }


def settings(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(of_kind(docs, "ConfigMap")["rg-resetgate"]["data"])


def annotations(docs: list[dict[str, Any]], component: str) -> dict[str, str]:
    pod = deployments(docs)[component]["spec"]["template"]
    return dict(pod["metadata"]["annotations"])


def test_templates_mount_on_the_senders_only_and_the_sender_check_passes_on_them(
    helm: Helm, tmp_path: Path
) -> None:
    docs = helm.template({"email.templates": shipped()})
    assert settings(docs)["RESETGATE_TEMPLATES_DIR"] == MOUNT
    data = of_kind(docs, "ConfigMap")["rg-resetgate-email-templates"]["data"]
    pod = deployments(docs)["sender"]["spec"]["template"]["spec"]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "email-templates"]
    assert mount == {"name": "email-templates", "mountPath": MOUNT, "readOnly": True}
    [volume] = [v for v in pod["volumes"] if v["name"] == "email-templates"]
    for item in volume["configMap"]["items"]:  # what the kubelet writes into the mount
        path = tmp_path / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]], encoding="utf-8")
    values = EmailSettings(templates_dir=str(tmp_path))
    assert check(Mailer(values, Templates(tmp_path))) == []
    assert Templates(tmp_path).locales() == Templates().locales()
    for component in ("admission", "poller", "router"):
        spec = deployments(docs)[component]["spec"]["template"]["spec"]
        assert all(v["name"] != "email-templates" for v in spec["volumes"])
        assert "checksum/templates" not in annotations(docs, component)


def test_a_changed_template_rolls_the_senders_and_nothing_else(helm: Helm) -> None:
    before = helm.template({"email.templates": shipped()})
    changed = {**shipped(), "fr/subject.txt": "Nouveau mot de passe pour {{ brand }}\n"}
    after = helm.template({"email.templates": changed})
    assert (
        annotations(before, "sender")["checksum/templates"]
        != annotations(after, "sender")["checksum/templates"]
    )
    assert (
        annotations(before, "sender")["checksum/config"]
        == (annotations(after, "sender")["checksum/config"])
    )
    assert annotations(before, "admission") == annotations(after, "admission")


def test_without_templates_the_shipped_defaults_are_used(helm: Helm) -> None:
    docs = helm.template({})
    assert "RESETGATE_TEMPLATES_DIR" not in settings(docs)
    assert "rg-resetgate-email-templates" not in of_kind(docs, "ConfigMap")
    assert "checksum/templates" not in annotations(docs, "sender")


def test_brands_and_hosted_templates_reach_the_services(helm: Helm) -> None:
    brands = {
        "starfall": {"name": "Starfall", "email_from": "Starfall <no-reply@starfall.example>"}
    }
    docs = helm.template(
        {
            "email.brands": brands,
            "email.brandName": "Moonfall",
            "email.providerTemplate": "reset-{locale}",
            "email.providerTemplateLocales": "en,fr",
            "provider.named": [
                {
                    "name": "primary",
                    "kind": "postmark",
                    "url": "https://api.postmarkapp.com",
                    "template": "reset-{brand}-{locale}",
                    "templateLocales": "en,ja",
                }
            ],
            "secrets.existingSecret": "s",
        }
    )
    data = settings(docs)
    parsed = EmailSettings.model_validate({"brands": json.loads(data["RESETGATE_BRANDS"])})
    assert parsed.brands["starfall"].email_from == "Starfall <no-reply@starfall.example>"
    assert data["RESETGATE_BRAND_NAME"] == "Moonfall"
    assert data["RESETGATE_PROVIDER_TEMPLATE"] == "reset-{locale}"
    assert data["RESETGATE_PROVIDER_TEMPLATE_LOCALES"] == "en,fr"
    assert data["RESETGATE_PROVIDER_PRIMARY_TEMPLATE"] == "reset-{brand}-{locale}"
    assert data["RESETGATE_PROVIDER_PRIMARY_TEMPLATE_LOCALES"] == "en,ja"


def test_a_template_path_that_would_escape_or_collide_is_refused(helm: Helm) -> None:

    error = helm.template_error({**BASE, "email.templates": {"en/../../etc/x": "x"}})
    assert 'email.templates "en/../../etc/x": a path may not hold ".."' in error
