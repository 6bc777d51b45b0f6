"""Fuzzing the live gateway from its own OpenAPI document: schemathesis' CLI with every check.

``finagent serve`` runs against a fresh PostgreSQL database and the Redis broker (no worker:
accepted analyses wait in the queues); ``schemathesis run --checks all`` with a fixed seed then
sends examples, coverage cases (every documented field at and beyond its bounds, undeclared
methods, missing headers), generated valid and invalid requests and stateful sequences (a
watchlist created, read, changed, run, deleted) to every operation but ``/health`` (503 without
a worker; covered by test_api_gateway). Settings in tests/support/schemathesis.toml; the hooks
(tests/support/fuzz_hooks.py) add the check that a refused request (4xx) stored nothing.

The suite runs :data:`FUZZ_EXAMPLES` examples per operation (``FINAGENT_FUZZ_EXAMPLES``
overrides it); the full run of docs/api.md ("Fuzzing") is this test with 100.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.integration.conftest import Service
from tests.integration.ops_support import start_process, stop_process, wait_http
from tests.support.private_services import free_port

#: ~5 minutes of a worker on a loaded 2-core machine: left out of the default run (docs/testing.md),
#: CI runs it in its second test command (``pytest -m full``).
pytestmark = pytest.mark.full

#: Examples per operation: ~2 minutes on a loaded 2-core machine (the coverage phase is most
#: of it and does not depend on this number).
FUZZ_EXAMPLES = int(os.environ.get("FINAGENT_FUZZ_EXAMPLES", "10"))
FUZZ_SEED = int(os.environ.get("FINAGENT_FUZZ_SEED", "20261126"))
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
CONFIG = REPO_ROOT / "tests" / "support" / "schemathesis.toml"


@pytest.fixture
def gateway(service: Service) -> Iterator[tuple[str, str]]:
    """``(base URL, key with every scope)`` of ``finagent serve`` on a free port; quotas, caps and
    the failed-auth limit high enough not to refuse a fuzzer (one client address whose
    authentication checks send thousands of requests without a key; the limits have tests of
    their own). Its log must not hold the key."""
    service.env.update(
        FINAGENT_API_ANALYSES_PER_MINUTE="1000000",
        FINAGENT_API_MAX_IN_FLIGHT="1000000",
        FINAGENT_API_FAILED_AUTH_PER_MINUTE="1000000",
        FINAGENT_WATCHLISTS_TENANT_MAX_WATCHLISTS="1000000",
        FINAGENT_WATCHLISTS_TENANT_MAX_TICKERS="100000000",
    )
    created = service.cli(
        "apikey", "create", "fuzzer", "--tenant", "fuzz", "--scopes", "read,analyze,watchlists,admin"
    )
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    port = free_port()
    proc = start_process(service, ["serve", "--host", "127.0.0.1", "--port", str(port)], "api.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/openapi.json", proc, lambda: (service.tmp / "api.log").read_text())
        yield base, key
    finally:
        stop_process(proc)
    assert key not in (service.tmp / "api.log").read_text()


@pytest.mark.timeout(300 + 30 * FUZZ_EXAMPLES)
def test_schemathesis_with_every_check_finds_nothing(service: Service, gateway: tuple[str, str]) -> None:
    base, key = gateway
    proc = subprocess.run(
        [
            SCHEMATHESIS,
            "--config-file",
            str(CONFIG),
            "--no-color",
            "run",
            f"{base}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(FUZZ_EXAMPLES),
            "--seed",
            str(FUZZ_SEED),
        ],
        cwd=REPO_ROOT,
        env={**service.env, "FINAGENT_FUZZ_API_KEY": key},
        capture_output=True,
        text=True,
        timeout=240 + 30 * FUZZ_EXAMPLES,
        check=False,
    )
    report = proc.stdout + proc.stderr
    summary = report.rfind("= WARNINGS =") if "= WARNINGS =" in report else report.rfind("API Operations:")
    print(report[summary:])  # shown with -s: warnings, phases, cases, seed, time
    assert proc.returncode == 0, report[-20_000:]
    with urllib.request.urlopen(f"{base}/openapi.json", timeout=30) as answer:
        document = json.load(answer)
    operations = sum(len(methods) for path, methods in document["paths"].items() if path != "/health")
    assert re.search(rf"Tested: {operations}\b", report), report[-5_000:]  # every one but /health
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert re.search(rf"✅ {phase}\b", report), (phase, report[-5_000:])
    # the digest was read from the seeded finished run, not only answered 404
    assert "GET /watchlists/{name}/runs/{run_date}/digest" not in report.split("WARNINGS")[-1], report
