"""Autoscaling: CPU HorizontalPodAutoscalers and KEDA on the send streams' lag."""

from __future__ import annotations

from typing import Any

from helmchart import BASE, CORE, Helm, Manifest, deployments, name_of, of_kind

from shared.keys import PartitionKeys


def scaled_object(helm: Helm, values: dict[str, Any]) -> dict[str, Any]:
    (only,) = of_kind(helm.template({"keda.enabled": True, **values}), "ScaledObject").values()
    return dict(only["spec"])


SCALED = [c for c in CORE if c != "poller"]


def test_hpa_targets_its_deployment_and_owns_the_replica_count(helm: Helm) -> None:
    docs = helm.template({f"{c}.autoscaling.enabled": True for c in SCALED})
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    assert set(hpas) == {name_of(c) for c in SCALED}
    for component, deployment in deployments(docs).items():
        if component not in SCALED:
            continue
        target = hpas[name_of(component)]["spec"]["scaleTargetRef"]
        assert target == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": deployment["metadata"]["name"],
        }
        # a rendered replica count would undo the autoscaler on every upgrade
        assert "replicas" not in deployment["spec"]


def test_the_poller_has_no_autoscaler(helm: Helm) -> None:
    # Only the lease holder polls: more replicas would not poll faster, so the chart offers
    # no HPA for it and the schema refuses the value.
    done = helm.lint({**BASE, "poller.autoscaling.enabled": True})
    assert done.returncode != 0
    assert "autoscaling" in done.stdout + done.stderr


def test_no_autoscaler_by_default(helm: Helm) -> None:
    docs = helm.template()
    assert not of_kind(docs, "HorizontalPodAutoscaler")
    assert not of_kind(docs, "ScaledObject")
    assert deployments(docs)["sender"]["spec"]["replicas"] == 2


def test_keda_has_one_lag_trigger_per_partition(helm: Helm) -> None:
    spec = scaled_object(helm, {"config.partitions": 4, "keda.lagCount": 25})
    assert spec["scaleTargetRef"]["name"] == name_of("sender")
    streams = [t["metadata"]["stream"] for t in spec["triggers"]]
    assert streams == [PartitionKeys(p).send for p in range(4)]
    for trigger in spec["triggers"]:
        assert trigger["type"] == "redis-streams"
        meta = trigger["metadata"]
        assert meta["consumerGroup"] == "senders"
        assert meta["lagCount"] == "25"
        assert meta["address"] == "redis.data.svc:6379"
        assert meta["databaseIndex"] == "0"
        assert meta["enableTLS"] == "false"
    # the sender serves every partition, so the total backlog sets the replica count
    modifiers = spec["advanced"]["scalingModifiers"]
    assert modifiers["formula"] == "p0 + p1 + p2 + p3"
    assert modifiers["target"] == "25"


def test_keda_follows_the_default_partition_count(helm: Helm) -> None:
    assert len(scaled_object(helm, {})["triggers"]) == 16


def test_keda_on_redis_cluster_uses_the_cluster_scaler(helm: Helm) -> None:
    spec = scaled_object(
        helm,
        {"redis.cluster": True, "keda.combine": "max", "redis.url": "rediss://seed.redis:7000"},
    )
    for trigger in spec["triggers"]:
        assert trigger["type"] == "redis-cluster-streams"
        assert trigger["metadata"]["addresses"] == "seed.redis:7000"
        assert trigger["metadata"]["enableTLS"] == "true"
        assert "databaseIndex" not in trigger["metadata"]
    assert "advanced" not in spec  # max: the hottest partition decides


def test_keda_with_a_secret_redis_url_uses_the_given_address(helm: Helm) -> None:
    spec = scaled_object(
        helm,
        {
            "redis.url": "",
            "redis.existingSecret": "r",
            "keda.redis.address": "redis-master.data:6379",
            "keda.redis.authenticationRef": "redis-auth",
        },
    )
    for trigger in spec["triggers"]:
        assert trigger["metadata"]["address"] == "redis-master.data:6379"
        assert trigger["authenticationRef"] == {"name": "redis-auth"}


def test_keda_leaves_the_sender_replica_count_to_keda(helm: Helm) -> None:
    docs = helm.template({"keda.enabled": True})
    assert "replicas" not in deployments(docs)["sender"]["spec"]
    assert deployments(docs)["admission"]["spec"]["replicas"] == 2


def test_keda_never_scales_the_sender_to_zero(helm: Helm) -> None:
    # the sender also promotes due retries, which show no stream lag
    done = helm.lint({**BASE, "keda.enabled": True, "keda.minReplicaCount": 0})
    assert done.returncode != 0
    assert scaled_object(helm, {})["minReplicaCount"] >= 1


def redis_egress(policy: Manifest) -> list[dict[str, Any]]:
    return [
        r for r in policy["spec"]["egress"] if any(p["port"] == 6379 for p in r.get("ports", []))
    ]


def test_keda_reaches_dev_redis_through_its_network_policy(helm: Helm) -> None:
    docs = helm.template({"redis.url": "", "devRedis.enabled": True, "keda.enabled": True})
    policy = of_kind(docs, "NetworkPolicy")[name_of("redis")]
    peers = policy["spec"]["ingress"][0]["from"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}}} in peers
    sender = of_kind(docs, "NetworkPolicy")[name_of("sender")]
    assert (
        redis_egress(sender)[0]["to"][0]["podSelector"]["matchLabels"][
            "app.kubernetes.io/component"
        ]
        == "redis"
    )
