"""The full chain through a real worker process on live Redis and Postgres (never eager)."""

from __future__ import annotations

import json

import redis
from sqlalchemy import text

from db import repo
from db.engine import get_engine
from pipeline.report import INDICATOR_LABELS
from tests.integration.conftest import Service

REQUIRED_ROW_FIELDS = (
    "id",
    "tool_call_id",
    "analysis_id",
    "stage",
    "iteration",
    "celery_task_id",
    "timestamp",
    "level",
    "tool",
    "symbol",
    "status",
    "attempt",
    "latency_ms",
    "result_summary",
    "arguments",
    "result",
)
JSON_KEYS = {
    "analysis_id",
    "symbol",
    "as_of",
    "status",
    "signal",
    "headline",
    "direction",
    "details",
    "rationale",
    "source_refs",
    "iteration",
    "errors",
    "indicators",
}


def _engine(service: Service):
    return get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])


def _count(service: Service, sql: str, **params) -> int:
    with _engine(service).connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def test_full_chain_for_aapl_writes_one_analysis_and_logged_tool_calls(
    service: Service, start_worker
) -> None:
    worker = start_worker()
    out = service.analyze_json("AAPL")

    assert JSON_KEYS <= set(out)
    assert out["status"] == "done" and out["symbol"] == "AAPL" and out["iteration"] == 0
    assert out["as_of"] == "2013-03-01"  # the embedded data's last date
    assert out["signal"] in {"BUY", "HOLD", "SELL"} and 0 <= out["details"]["confidence"] <= 1
    assert "confidence" not in out  # the raw confidence is a detail, not evidence
    assert set(out["indicators"]) == set(INDICATOR_LABELS)
    assert all(isinstance(v, float | int) for v in out["indicators"].values())
    assert out["grounding"]["unverified"] == []

    engine = _engine(service)
    assert _count(service, "SELECT count(*) FROM analyses") == 1
    row = repo.get_analysis(engine=engine, analysis_id=out["analysis_id"])
    assert row is not None and row["status"] == "done" and row["signal"] == out["signal"]
    assert row["report"].startswith("# AAPL") and row["finished_at"] is not None

    calls = repo.get_tool_calls(engine=engine, analysis_id=out["analysis_id"])
    assert len(calls) >= 3
    assert {c["tool"] for c in calls} >= {"get_stock_data", "get_history", "technical_indicators"}
    for call in calls:
        missing = [f for f in REQUIRED_ROW_FIELDS if call.get(f) in (None, "")]
        assert not missing, (call["tool"], missing)
        assert call["status"] == "success" and call["attempt"] == 1
    # every citation in the report is a logged tool call of this analysis
    logged = {c["tool_call_id"] for c in calls}
    assert set(out["source_refs"]) <= logged
    for item in out["rationale"]:
        assert item["source_refs"] and set(item["source_refs"]) <= logged

    # the stage results were not stored in the result backend: the state travels in the chain's
    # messages and the analyses row (tasks.stages), nobody reads them there
    stored = [
        json.loads(raw or b"{}")
        for raw in (
            redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"]).get(key)
            for key in redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"]).scan_iter(
                "celery-task-meta-*"
            )
        )
    ]
    assert not [m for m in stored if isinstance(m.get("result"), dict) and "stock_symbol" in m["result"]]
    assert not [m for m in stored if m.get("status") == "STARTED"]

    # the worker wrote one JSON log line per tool call with the same ids
    worker.terminate()
    worker.wait(timeout=30)
    lines = [
        json.loads(line)
        for line in service.logs[0].read_text().splitlines()
        if line.startswith("{") and '"finagent.tool_calls"' in line
    ]
    assert {line["tool_call_id"] for line in lines} == logged
    assert all(line["latency_ms"] >= 0 and line["attempt"] == 1 for line in lines)


def test_timeout_is_retried_with_backoff_and_attempts_are_rows(service: Service, start_worker) -> None:
    start_worker(FINAGENT_DATA_PROVIDER="tests.support.providers:timeout_once")
    out = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    assert out["status"] == "done"

    calls = repo.get_tool_calls(engine=_engine(service), analysis_id=out["analysis_id"])
    first = [c for c in calls if c["tool"] == "get_stock_data"]
    assert [(c["attempt"], c["status"], c["error_code"]) for c in first] == [
        (1, "error", "NETWORK_ERROR"),
        (2, "success", None),
    ]
    assert first[0]["tool_call_id"] == first[1]["tool_call_id"]
    assert first[0]["level"] == "WARNING" and "retrying in" in first[0]["retry_hint"]
    assert first[1]["timestamp"] > first[0]["timestamp"]


def test_no_data_on_first_pass_reenqueues_and_second_pass_completes(service: Service, start_worker) -> None:
    start_worker(FINAGENT_DATA_PROVIDER="tests.support.providers:no_data_once")
    out = service.analyze_json("MSFT", "--as-of", "2011-12-30")
    assert out["status"] == "done" and out["iteration"] == 1
    assert [(e["iteration"], e["code"]) for e in out["errors"]] == [(0, "NO_DATA")]

    analysis_id = out["analysis_id"]
    assert (
        _count(service, "SELECT count(*) FROM analysis_iterations WHERE analysis_id = :a", a=analysis_id) == 2
    )
    calls = repo.get_tool_calls(engine=_engine(service), analysis_id=analysis_id)
    by_pass = {(c["iteration"], c["tool"], c["status"]) for c in calls}
    assert (0, "get_stock_data", "error") in by_pass and (1, "get_stock_data", "success") in by_pass
    assert (1, "technical_indicators", "success") in by_pass


def test_invalid_input_is_refused_before_anything_is_enqueued(service: Service) -> None:
    # no worker running: a refused request must not need one
    cases = [
        (("AAPL1",), "AAPL1"),
        (("ZZZZ",), "ZZZZ"),
        (("AAPL", "--as-of", "2999-01-01"), "future"),
        (("AAPL", "--as-of", "1990-01-02"), "1990-01-02"),
        (("AAPL", "--as-of", "yesterday"), "yesterday"),
    ]
    for args, needle in cases:
        proc = service.cli("analyze", *args, "--json", timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""
    assert _count(service, "SELECT count(*) FROM analyses") == 0
    broker = redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"])
    assert [k for k in broker.scan_iter() if not k.startswith(b"_kombu")] == []


def test_no_wait_then_show(service: Service, start_worker) -> None:
    start_worker()
    proc = service.cli("analyze", "IBM", "--as-of", "2009-03-09", "--no-wait")
    assert proc.returncode == 0, proc.stderr
    analysis_id = proc.stdout.strip()
    assert len(analysis_id) == 36
    from core.settings import Settings
    from pipeline.service import wait_for

    wait_for(
        analysis_id=analysis_id,
        timeout=120,
        settings=Settings(service_database_url=service.env["FINAGENT_SERVICE_DATABASE_URL"]),
    )
    shown = service.cli("show", analysis_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["analysis_id"] == analysis_id
    assert service.cli("show", "no-such-id").returncode == 2
