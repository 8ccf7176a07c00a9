"""Pushed events for benchmarks/observation.py: the webhook and the SES queue modes.

webhook  N accepted operations; signed SendGrid Event Webhook batches POSTed to the poller's
         webhook port at ``rate`` events/s; lag = recorded in the store - the moment the
         batch was posted (SendGrid's own ``timestamp`` has whole seconds only).
queue    N accepted operations; SES Delivery events published on an SNS topic in moto's
         server mode, fanned out to the SQS queue the poller long-polls; lag = recorded in the
         store - the event's own timestamp (milliseconds).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

from services.ctl.embedded import free_port
from shared import codec, ids
from shared.keys import PartitionKeys
from tests.inbound.providers import SendGridSigner, iso, sendgrid_event, ses_event
from tests.support.moto_server import AWS_ENV, aws_client, moto_server, ses_event_queue
from tests.support.processes import ServiceProcess

IN_FLIGHT = 32


def cpu_seconds(service: ServiceProcess) -> float:
    """User + system CPU of the service process so far (from /proc), in seconds."""
    assert service.process is not None
    fields = Path(f"/proc/{service.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def observed_at(redis: Redis, ops: list[str]) -> dict[str, tuple[int, int]]:
    """op -> (delivery_event_at, delivery_observed_at) in ms, for the observed ones."""
    found: dict[str, tuple[int, int]] = {}
    for start in range(0, len(ops), 5000):
        chunk = ops[start : start + 5000]
        async with redis.pipeline(transaction=False) as pipe:
            for op in chunk:
                pipe.hmget(
                    PartitionKeys.of(op).operation(op),
                    ["delivery_event_at", "delivery_observed_at"],
                )
            for op, (event_at, seen) in zip(chunk, await pipe.execute(), strict=True):
                if event_at and seen:
                    found[op] = (int(event_at), int(seen))
    return found


async def paced(n: int, rate: float, batch: int, send: Any) -> None:
    """Call ``send(start, stop)`` for consecutive slices of ``batch``, ``rate`` items/s,
    at most IN_FLIGHT at once (a slow answer must not slow the schedule)."""
    limit = asyncio.Semaphore(IN_FLIGHT)
    began = time.monotonic()

    async def one(start: int) -> None:
        async with limit:
            await send(start, min(n, start + batch))

    tasks = []
    for start in range(0, n, batch):
        await asyncio.sleep(max(0.0, began + start / rate - time.monotonic()))
        tasks.append(asyncio.create_task(one(start)))
    await asyncio.gather(*tasks)


def signed_batches(
    ops: list[str], batch: int, signer: SendGridSigner
) -> list[tuple[list[str], bytes]]:
    """Every batch's body, built before the clock starts: the driver's own work per POST is
    then one signature (over a fresh timestamp) and the POST itself."""
    now = time.time()
    return [
        (
            ops[start : start + batch],
            codec.dumps(
                [
                    sendgrid_event(op, f"bench-{op}", "delivered", now)
                    for op in ops[start : start + batch]
                ]
            ),
        )
        for start in range(0, len(ops), batch)
    ]


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy on ``pid`` for ``seconds`` (a flame graph in ``out``), when py-spy is there."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy not found: pip install py-spy to profile", flush=True)
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "100", "-o", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def webhook_run(
    redis: Redis,
    ops: list[str],
    env: dict[str, str],
    logs: Path,
    rate: float,
    batch: int,
    profile_dir: Path | None = None,
) -> dict[str, Any]:
    signer = SendGridSigner.generate()
    port = free_port()
    service = ServiceProcess(
        "poller",
        {
            **env,
            "RESETGATE_WEBHOOK_PORT": str(port),
            "RESETGATE_SENDGRID_WEBHOOK_PUBLIC_KEY": signer.public_key,
        },
        logs,
    )
    await service.start()
    batches = signed_batches(ops, batch, signer)
    spies = []
    if profile_dir is not None:
        assert service.process is not None
        seconds = len(ops) / rate
        spies = [
            profile(service.process.pid, seconds, profile_dir / "poller.svg"),
            profile(os.getpid(), seconds, profile_dir / "driver.svg"),
        ]
    cpu0 = cpu_seconds(service)
    posted: dict[str, float] = {}
    url = f"http://127.0.0.1:{port}/webhooks/sendgrid"
    failures = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=IN_FLIGHT)) as session:

        async def send(start: int, stop: int) -> None:
            nonlocal failures
            chunk, body = batches[start // batch]
            headers = signer.headers(body)
            now = time.time()
            for op in chunk:
                posted[op] = now
            async with session.post(url, data=body, headers=headers) as answer:
                failures += answer.status != 200

        began = time.monotonic()
        await paced(len(ops), rate, batch, send)
        sent = time.monotonic() - began
    seen = await _until_seen(redis, ops)
    cpu = cpu_seconds(service) - cpu0
    await service.stop()
    for spy in spies:
        if spy is not None:
            await asyncio.to_thread(spy.wait)
    lags = [(seen_ms / 1000 - posted[op]) for op, (_, seen_ms) in seen.items()]
    return {
        "lags": lags,
        "observed": len(seen),
        "send_seconds": sent,
        "failures": failures,
        "cpu": cpu,
    }


async def queue_run(
    redis: Redis, ops: list[str], env: dict[str, str], logs: Path, rate: float, wait: int
) -> dict[str, Any]:
    async with moto_server(logs) as aws:
        topic, queue, dead = await ses_event_queue(aws)
        service = ServiceProcess(
            "poller",
            {
                **env,
                **AWS_ENV,
                "RESETGATE_SES_QUEUE_URL": queue,
                "RESETGATE_SES_DEAD_LETTER_QUEUE_URL": dead,
                "RESETGATE_SES_WAIT_SECONDS": str(wait),
                "RESETGATE_AWS_ENDPOINT_URL": aws,
            },
            logs,
        )
        await service.start()
        cpu0 = cpu_seconds(service)
        async with aws_client("sns", aws) as sns:

            async def send(start: int, stop: int) -> None:
                entries = [
                    {
                        "Id": str(i),
                        "Message": codec.dumps_str(
                            ses_event(op, f"bench-{op}", "Delivery", iso(time.time()))
                        ),
                    }
                    for i, op in enumerate(ops[start:stop])
                ]
                await sns.publish_batch(TopicArn=topic, PublishBatchRequestEntries=entries)

            began = time.monotonic()
            await paced(len(ops), rate, 10, send)  # SNS takes at most 10 a batch
            sent = time.monotonic() - began
        seen = await _until_seen(redis, ops)
        cpu = cpu_seconds(service) - cpu0
        await service.stop()
    lags = [(seen_ms - event_ms) / 1000 for event_ms, seen_ms in seen.values()]
    return {"lags": lags, "observed": len(seen), "send_seconds": sent, "failures": 0, "cpu": cpu}


async def _until_seen(
    redis: Redis, ops: list[str], timeout: float = 300
) -> dict[str, tuple[int, int]]:
    deadline = time.monotonic() + timeout
    while True:
        seen = await observed_at(redis, ops)
        if len(seen) == len(ops) or time.monotonic() > deadline:
            return seen
        await asyncio.sleep(0.25)


def operation_ids(n: int, partitions: int) -> list[str]:
    return [ids.operation_id(i % partitions) for i in range(n)]
