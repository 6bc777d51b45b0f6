"""Property-based fuzzing of the live gateway from its own OpenAPI document (schemathesis).

Every operation but ``/health`` (no input; 503 without a worker) is called with generated
valid (positive) and invalid (negative) requests against a uvicorn server on 127.0.0.1, with a
key holding every scope. For every answer: no 5xx, the status code and the body are the ones
the document declares (error bodies are ``ErrorOut``: a ``detail`` string), and a refused
request (4xx) stored nothing (analyses, watchlists, runs, idempotency claims, keys; the audit
log is expected to grow). Examples are bounded (``FUZZ_EXAMPLES`` per operation and mode,
derandomized) so the test stays well under a minute.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, given
from schemathesis import GenerationMode

from db.engine import get_engine
from db.migrate import upgrade
from pipeline.api.auth import create_key
from pipeline.core.settings import Settings
from pipeline.core.tenancy import SCOPES
from tests.pipeline.api.conftest import serve_app

#: Examples per operation and generation mode: ~13 operations x 2 modes x 20 ≈ 500 requests
#: (~20 s); ``FINAGENT_FUZZ_EXAMPLES=200`` explores further by hand.
FUZZ_EXAMPLES = int(os.environ.get("FINAGENT_FUZZ_EXAMPLES", "20"))
STORED_TABLES = ("analyses", "watchlists", "watchlist_runs", "idempotency_keys", "api_keys", "tool_calls")


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, str, Settings]]:
    """``(base URL, key with every scope, settings)``; quotas high enough not to interfere."""
    url = f"sqlite:///{tmp_path / 'fuzz.sqlite3'}"
    upgrade(url=url)
    settings = Settings(
        database_url=url,
        state_dir=tmp_path,
        api_analyses_per_minute=100_000,
        api_max_in_flight=100_000,
        api_max_body_bytes=64 * 1024,
    )
    key = create_key(name="fuzzer", tenant="fuzz", scopes=SCOPES, settings=settings)
    with serve_app(settings) as base:
        yield base, key, settings


def _counts(settings: Settings) -> dict[str, int]:
    with get_engine(settings.effective_database_url).connect() as conn:
        count = "SELECT count(*) FROM {}"
        return {t: int(conn.execute(sa.text(count.format(t))).scalar_one()) for t in STORED_TABLES}


def test_fuzz_the_openapi_document(live: tuple[str, str, Settings]) -> None:
    base, key, settings = live
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    checks = [
        schemathesis.checks.not_a_server_error,
        schemathesis.checks.status_code_conformance,
        schemathesis.checks.content_type_conformance,
        schemathesis.checks.response_schema_conformance,
    ]
    operations = [result.ok() for result in schema.get_all_operations()]
    fuzzed = [op for op in operations if op.path != "/health"]
    assert len(fuzzed) >= 12, [op.label for op in fuzzed]
    seen: dict[str, set[int]] = {}

    def fuzz(operation: Any, mode: GenerationMode) -> None:
        @given(case=operation.as_strategy(generation_mode=mode))
        @hypothesis.settings(
            max_examples=FUZZ_EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        )
        def run(case: Any) -> None:
            before = _counts(settings)
            response = case.call(base_url=base, headers={"X-API-Key": key}, timeout=30)
            seen.setdefault(operation.label, set()).add(response.status_code)
            case.validate_response(response, checks=checks)
            if response.status_code >= 400:
                body = response.json()
                assert isinstance(body.get("detail"), str), body
                assert _counts(settings) == before, (operation.label, response.status_code, body)

        run()

    for operation in fuzzed:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode)
    # the fuzzer reached every operation
    assert set(seen) == {op.label for op in fuzzed}
