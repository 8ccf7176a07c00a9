"""moto in server mode (``python -m moto.server``) on a free loopback port, as a real process:
the AWS emulator the SES queue path is tested against (SNS topic -> SQS queue, as a
configuration set's event destination delivers them).

    async with moto_server(tmp_path) as endpoint:
        async with aws_client("sqs", endpoint) as sqs: ...
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiobotocore.session import get_session

from services.ctl.embedded import free_port
from tests.support.processes import PROJECT_ROOT, START_TIMEOUT, listens

REGION = "us-east-1"
# moto accepts any credentials; these keep botocore from looking for real ones.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


@contextlib.asynccontextmanager
async def moto_server(log_dir: Path) -> AsyncIterator[str]:
    """``log_dir`` must exist."""
    port = free_port()
    with (log_dir / "moto.log").open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            str(port),
            cwd=PROJECT_ROOT,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(endpoint, process)
        yield endpoint
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _wait_ready(endpoint: str, process: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as session, asyncio.timeout(START_TIMEOUT):
        while process.returncode is None:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(endpoint + "/moto-api/") as response:
                    # Only its answer counts (another process may have taken the port first).
                    if response.status == 200 and listens(process.pid, response.url.port or 0):
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"moto server exited with {process.returncode}")


def aws_client(service: str, endpoint: str) -> Any:
    return get_session().create_client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    )


async def ses_event_queue(endpoint: str) -> tuple[str, str, str]:
    """An SNS topic (the configuration set's event destination) with an SQS queue subscribed
    and a dead-letter queue beside it: (topic arn, queue url, dead-letter queue url)."""
    async with aws_client("sns", endpoint) as sns, aws_client("sqs", endpoint) as sqs:
        topic = (await sns.create_topic(Name="resetgate-ses-events"))["TopicArn"]
        dead = (await sqs.create_queue(QueueName="resetgate-ses-events-dlq"))["QueueUrl"]
        queue = (await sqs.create_queue(QueueName="resetgate-ses-events"))["QueueUrl"]
        attributes = await sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        await sns.subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=attributes["Attributes"]["QueueArn"]
        )
    return topic, queue, dead
