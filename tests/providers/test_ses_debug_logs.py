"""At RESETGATE_LOG_LEVEL=DEBUG, an SES send logs no access key id and no signature
(issue 34, item 8).

botocore's DEBUG output is a wire dump: the signed Authorization header (``Credential=<key
id>/…, Signature=<64 hex>``), the string it signed, whole SQS bodies. The logging setup keeps
botocore at INFO whatever the level, and scrub() replaces key ids and 64-hex signatures in any
line that still carries one. A real send through aiobotocore to moto's server, captured as the
service would print it; and resetgate's own DEBUG lines are still printed (what the cap could
cost).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from shared import logging as service_logging
from shared.providers.ses import SesProvider
from tests.providers.moto_patient import TIMEOUTS, moto
from tests.providers.test_ses_moto import MESSAGE, REGION

KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key id


@pytest.fixture
def moto_with_key() -> Iterator[str]:
    saved = dict(os.environ)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": "x" * 40,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
        }
    )
    try:
        with moto() as url:
            yield url
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def debug_logging(capfd: pytest.CaptureFixture[str]) -> Iterator[None]:
    """The service's logging at DEBUG, writing to the stderr ``capfd`` captures."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    wires = {name: logging.getLogger(name).level for name in ("botocore", "aiobotocore", "urllib3")}
    service_logging.setup("sender", "DEBUG")
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, wire_level in wires.items():
        logging.getLogger(name).setLevel(wire_level)


@pytest.mark.usefixtures("debug_logging")
async def test_an_ses_send_at_debug_logs_no_key_id_or_signature(
    capfd: pytest.CaptureFixture[str], moto_with_key: str
) -> None:
    provider = SesProvider(REGION, moto_with_key, **TIMEOUTS)
    try:
        await provider.send("op-0-01hxyz", MESSAGE)
    finally:
        await provider.aclose()
    logging.getLogger("services.sender").debug("own debug line")
    err = capfd.readouterr().err
    assert "own debug line" in err  # resetgate's DEBUG still prints
    assert KEY_ID not in err and "Signature=" not in err.replace("Signature=[hex]", "")


def test_a_botocore_shaped_line_that_reaches_the_formatter_is_scrubbed() -> None:
    signature = "ab12" * 16
    line = (
        f"Authorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/20261202/eu-west-1/ses/"
        f"aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}"
    )
    record = logging.LogRecord("botocore.endpoint", logging.DEBUG, __file__, 1, line, None, None)
    out = service_logging.JsonFormatter("sender").format(record)
    assert KEY_ID not in out and signature not in out
    assert "SignedHeaders=host;x-amz-date" in out  # the rest of the line is kept
