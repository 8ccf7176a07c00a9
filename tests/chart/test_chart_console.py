"""The support console in the chart: off by default; on, admission gets the env its settings
class reads, a container port named console, a ClusterIP Service of its own, a NetworkPolicy
rule admitting only the auth proxy, and the public Ingress still routes nothing of it."""

from __future__ import annotations

from typing import Any

from helmchart import BASE, Helm, Manifest, container, deployments, env, name_of, of_kind

from services.admission.settings import ConsoleSettings

CONSOLE_SERVICE = f"{name_of('admission')}-console"
PROXY_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "sso"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "sso-proxy"}},
}
# Every console value set, so every env entry the chart can render is rendered.
EVERYTHING: dict[str, Any] = {
    "console.enabled": True,
    "console.port": 8099,
    "console.sessionSeconds": 600,
    "console.tokenRole": "read",
    "console.proxy.userHeader": "X-Forwarded-User",
    "console.proxy.groupsHeader": "X-Forwarded-Groups",
    "console.proxy.trustedProxies": ["10.0.0.0/8", "fd00::/8"],
    "console.actGroups": ["oncall", "sre"],
    "console.actUsers": ["maria"],
    "console.readGroups": ["support"],
    "console.signIn.burst": 3,
    "console.signIn.perMinute": 1,
    "console.networkPolicy.namespaceSelector": PROXY_PEER["namespaceSelector"],
    "console.networkPolicy.podSelector": PROXY_PEER["podSelector"],
    "ingress.enabled": True,
    "ingress.host": "reset.example.test",
}


def console_env(deployment: Manifest) -> dict[str, Any]:
    return {k: v for k, v in env(deployment).items() if k.startswith("RESETGATE_CONSOLE_")}


def port_names(deployment: Manifest) -> set[str]:
    return {port["name"] for port in container(deployment)["ports"]}


def admission_ingress(docs: list[Manifest]) -> list[dict[str, Any]]:
    policy = of_kind(docs, "NetworkPolicy")[name_of("admission")]
    return list(policy["spec"]["ingress"])


def test_no_console_by_default(helm: Helm) -> None:
    docs = helm.template({"ingress.enabled": True, "ingress.host": "reset.example.test"})
    for deployment in deployments(docs).values():
        assert console_env(deployment) == {}
        assert "console" not in port_names(deployment)
    assert CONSOLE_SERVICE not in of_kind(docs, "Service")
    assert not any(
        port["port"] == "console" for rule in admission_ingress(docs) for port in rule["ports"]
    )


def test_console_env_is_what_the_settings_class_reads(helm: Helm) -> None:
    docs = helm.template(EVERYTHING)
    rendered = console_env(deployments(docs)["admission"])
    assert rendered == {
        "RESETGATE_CONSOLE_PORT": "8099",
        "RESETGATE_CONSOLE_HOST": "0.0.0.0",
        "RESETGATE_CONSOLE_SESSION_SECONDS": "600",
        "RESETGATE_CONSOLE_TOKEN_ROLE": "read",
        "RESETGATE_CONSOLE_PROXY_USER_HEADER": "X-Forwarded-User",
        "RESETGATE_CONSOLE_PROXY_GROUPS_HEADER": "X-Forwarded-Groups",
        "RESETGATE_CONSOLE_TRUSTED_PROXIES": "10.0.0.0/8,fd00::/8",
        "RESETGATE_CONSOLE_ACT_GROUPS": "oncall,sre",
        "RESETGATE_CONSOLE_ACT_USERS": "maria",
        "RESETGATE_CONSOLE_READ_GROUPS": "support",
        "RESETGATE_CONSOLE_SIGN_IN_BURST": "3",
        "RESETGATE_CONSOLE_SIGN_IN_PER_MINUTE": "1",
    }
    # One truth: each name is a field of the console's settings, and each value parses.
    fields = {name.removeprefix("RESETGATE_").lower(): value for name, value in rendered.items()}
    assert set(fields) <= set(ConsoleSettings.model_fields)
    parsed = ConsoleSettings(**fields)
    assert parsed.console_port == 8099 and parsed.console_sign_in_per_minute == 1
    # Only admission serves the console; the other services get none of it.
    for component, deployment in deployments(docs).items():
        if component != "admission":
            assert console_env(deployment) == {}


def test_unset_console_values_keep_the_service_defaults(helm: Helm) -> None:
    docs = helm.template({"console.enabled": True})
    assert console_env(deployments(docs)["admission"]) == {
        "RESETGATE_CONSOLE_PORT": "8086",  # as `make run` serves it; 8090 is the sandbox
        "RESETGATE_CONSOLE_HOST": "0.0.0.0",
    }


def test_console_port_is_on_its_own_cluster_ip_service_never_the_ingress(helm: Helm) -> None:
    docs = helm.template({**EVERYTHING, "admission.service.type": "LoadBalancer"})
    admission = deployments(docs)["admission"]
    assert {"name": "console", "containerPort": 8099, "protocol": "TCP"} in container(admission)[
        "ports"
    ]
    services = of_kind(docs, "Service")
    console = services[CONSOLE_SERVICE]["spec"]
    assert console["type"] == "ClusterIP"
    assert console["ports"] == [
        {"name": "console", "port": 8099, "targetPort": "console", "protocol": "TCP"}
    ]
    assert console["selector"] == services[name_of("admission")]["spec"]["selector"]
    # admission's own Service (a LoadBalancer here) does not carry it
    public_ports = {port["name"] for port in services[name_of("admission")]["spec"]["ports"]}
    assert public_ports == {"http", "metrics"}
    (ingress,) = of_kind(docs, "Ingress").values()
    backends = [
        path["backend"]["service"]
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends == [{"name": name_of("admission"), "port": {"name": "http"}}]


def test_console_port_is_admitted_from_the_auth_proxy_only(helm: Helm) -> None:
    rules = admission_ingress(helm.template(EVERYTHING))
    console_rules = [r for r in rules if {"port": "console", "protocol": "TCP"} in r["ports"]]
    assert console_rules == [
        {"ports": [{"port": "console", "protocol": "TCP"}], "from": [PROXY_PEER]}
    ]


def test_console_port_must_be_its_own(helm: Helm) -> None:
    for port in (8080, 8081):
        error = " ".join(
            helm.template_error({**BASE, "console.enabled": True, "console.port": port}).split()
        )
        assert "give the console a port of its own" in error
