"""Test setup: real redis-server processes on free ports, started here (never :6379)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis, RedisCluster

from services.ctl.embedded import RedisServer
from shared.settings import PolicySettings
from shared.tokens import parse_keys
from tests.support import ast_parse, cluster_scripts, cpu, durations, leftovers
from tests.support.redis_cluster import RedisClusterServers

ast_parse.install()  # before any test module is parsed: see the module

TEST_TOKEN_KEYS = "k2:second-secret-0123456789abcdef,k1:first-secret-0123456789abcdef"


# RESETGATE_TEST_REDIS=cluster (`make test-cluster`) gives the cluster-aware suites
# (tests/e2e, tests/sender) a 3-master Redis Cluster instead of one redis-server.
CLUSTER = os.environ.get("RESETGATE_TEST_REDIS") == "cluster"


@pytest.fixture(scope="session")
def redis_server(request: pytest.FixtureRequest) -> Iterator[RedisServer | RedisClusterServers]:
    server = RedisClusterServers().start() if CLUSTER else RedisServer().start()
    yield server
    if isinstance(server, RedisClusterServers):  # which scripts ran on it: see the module
        ran = cluster_scripts.ran_here([n.port for n in server.all_nodes()])
        workeroutput = getattr(request.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[cluster_scripts.KEY] = sorted(ran)
        else:
            request.config.pluginmanager.get_plugin("cluster-scripts").add(ran)
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServers]:
    cluster = RedisClusterServers().start()
    yield cluster
    cluster.stop()


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client: Any = (
        RedisCluster.from_url(redis_server.url, decode_responses=True)
        if CLUSTER
        else Redis.from_url(redis_server.url, decode_responses=True)
    )
    await client.ping()
    await client.flushall()
    yield client
    await client.aclose()


@pytest.fixture
async def cluster_client(redis_cluster: RedisClusterServers) -> AsyncIterator[RedisCluster]:
    client = RedisCluster.from_url(redis_cluster.url, decode_responses=True)
    await client.flushall()
    yield client
    await client.aclose()


def make_settings(redis_url: str, **overrides: Any) -> PolicySettings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "redis_cluster": CLUSTER,
        "token_keys": TEST_TOKEN_KEYS,
        "partitions": 4,
        "cooldown_seconds": 60,
    }
    values.update(overrides)
    return PolicySettings(**values)


@pytest.fixture
def settings(redis_server: RedisServer) -> PolicySettings:
    return make_settings(redis_server.url)


@pytest.fixture
def token_keys() -> Any:
    return parse_keys(TEST_TOKEN_KEYS)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook has no order)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parallel runs (`make test`: pytest-xdist, ``--dist loadgroup``): tests that share a
    package- or module-scoped fixture (one service stack, one admission process) go to one
    worker, so the fixture starts once; every other test is balanced on its own. Derived from
    the fixtures each test uses, so a new test or module needs nothing extra. Session
    fixtures (the redis-server) exist once per worker. The units then run longest first, by
    tests/durations.json (tests/support/durations.py). Without xdist (``-p no:xdist``) the
    mark is unknown, and nothing needs it."""
    if not config.pluginmanager.has_plugin("xdist"):
        return
    groups: dict[str, str] = {}
    for item in items:
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
    if hasattr(config, "workerinput"):  # an xdist worker: each sorts alike, as xdist checks
        durations.order(items, groups, durations.load())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        durations.OPTION,
        action="store_true",
        help=f"write each test's seconds to {durations.FILE.name}",
    )
    parser.addoption(
        cpu.OPTION,
        metavar="FILE",
        help="write each test's CPU-s (its reaped processes included) to FILE, rank the files",
    )


def pytest_configure(config: pytest.Config) -> None:
    leftovers.configure(config)  # first: every later temporary file lands in its directory
    if config.getoption(durations.OPTION) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(durations.Recorder(), "record-durations")
    cpu.configure(config)
    if CLUSTER and not hasattr(config, "workerinput"):
        config.pluginmanager.register(cluster_scripts.Report(), "cluster-scripts")


def _shared_fixture_group(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {d.scope for defs in info.name2fixturedefs.values() for d in defs}
    if "package" in scopes:
        return str(item.path.parent)
    if "module" in scopes or "class" in scopes:
        return item.nodeid.split("::")[0]
    return None
