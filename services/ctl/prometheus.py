"""``resetgate up --prometheus``: a real Prometheus (the Debian package's, which
``tools/install-prometheus.sh`` installs) scraping every service's operational listener,
with the chart's alert rules loaded (charts/resetgate/files/alerts.rules.yml, the file
promtool tests): a newcomer watches OldestEligibleAgeHigh go pending and fire during a
storm from the sandbox, and clear after it. As written the rules match every series, which
is right for a Prometheus scraping one stack.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from services.ctl.ports import OPS
from services.ctl.stack import PROJECT_ROOT

RULES_FILE = PROJECT_ROOT / "charts" / "resetgate" / "files" / "alerts.rules.yml"
INSTALLER = PROJECT_ROOT / "tools" / "install-prometheus.sh"
INTERVAL = "5s"  # scrape and evaluation: an alert's `for:` is what delays it, not this


def binary() -> str:
    """The prometheus binary, installed first when missing; one line saying why not."""
    found = shutil.which("prometheus")
    if found is None and INSTALLER.is_file():
        subprocess.run(["sh", str(INSTALLER)], capture_output=True, timeout=600, check=False)
        found = shutil.which("prometheus")
    if found is None:
        raise SystemExit(
            "--prometheus: no prometheus binary and tools/install-prometheus.sh could not "
            "install one (it needs root): apt-get install prometheus, or run without "
            "--prometheus"
        )
    if not RULES_FILE.is_file():
        raise SystemExit(f"--prometheus: the alert rules are not at {RULES_FILE}")
    return found


def config(ports: dict[str, int]) -> dict[str, object]:
    """One job per service, named as in Kubernetes (the job label the dashboards read)."""
    jobs = [
        {"job_name": name.removesuffix(OPS), "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
        for name, port in ports.items()
        if name.endswith(OPS)
    ]
    return {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [str(RULES_FILE)],
        "scrape_configs": jobs,
    }


def command(ports: dict[str, int], directory: Path) -> list[str]:
    """The prometheus command line; its config (JSON is YAML) and data under ``directory``."""
    home = directory / "prometheus"
    home.mkdir(exist_ok=True)
    path = home / "prometheus.yml"
    path.write_text(json.dumps(config(ports), indent=1))
    return [
        binary(),
        f"--config.file={path}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
        "--log.level=warn",
    ]


def start(ports: dict[str, int], directory: Path) -> subprocess.Popen[bytes]:
    with (directory / "prometheus.log").open("ab") as log:
        return subprocess.Popen(
            command(ports, directory),
            stdout=log,
            stderr=log,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
