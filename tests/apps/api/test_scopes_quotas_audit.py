"""Scopes (403 naming the missing one), per-key quotas (429 + Retry-After) and the audit log,
through a real uvicorn gateway on a migrated SQLite file (lifespan off: enqueued analyses stay
``queued``, which is what "in flight" means)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from apps.api.auth import create_key
from apps.api.quotas import seconds_to_utc_midnight
from core.settings import Settings
from core.tenancy import TenancyError, parse_scopes
from db import repo
from db.engine import get_engine
from tests.apps.api.conftest import Gateway

BODY = {"symbol": "AAPL", "as_of": "2012-06-29"}


def _count(settings: Settings, table: str) -> int:
    with get_engine(settings.service.effective_database_url).connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_parse_scopes() -> None:
    assert parse_scopes(None) == parse_scopes("") == ("read", "analyze", "watchlists")
    assert parse_scopes(" admin , read,read") == ("read", "admin")
    with pytest.raises(TenancyError, match="delete"):
        parse_scopes("read,delete")


def test_each_endpoint_needs_its_scope(make_gateway: Gateway) -> None:
    base, settings = make_gateway()
    reader = create_key(name="reader", tenant="acme", scopes=("read",), settings=settings)
    writer = create_key(name="writer", tenant="acme", scopes=("watchlists",), settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": reader}) as r:
        refused = {
            "analyze": r.post("/analyze", json=BODY),
            "watchlists": r.post("/watchlists", json={"name": "x", "tickers": ["AAPL"]}),
            "admin": r.get("/audit"),
        }
        for scope, response in refused.items():
            assert response.status_code == 403, response.text
            assert f"lacks the '{scope}' scope" in response.json()["detail"]
        # 403 before any lookup (the watchlist does not even exist)
        assert r.patch("/watchlists/x", json={"enabled": False}).status_code == 403
        assert r.post("/watchlists/x/runs", json={}).status_code == 403
        assert r.delete("/watchlists/x").status_code == 403
        assert r.get("/analyses").status_code == 200 and r.get("/watchlists").status_code == 200
    assert _count(settings, "analyses") == _count(settings, "watchlists") == 0
    with httpx.Client(base_url=base, headers={"X-API-Key": writer}) as w:
        assert w.post("/watchlists", json={"name": "x", "tickers": ["AAPL"]}).status_code == 201
        assert "'read' scope" in w.get("/watchlists/x").json()["detail"]
        assert "'read' scope" in w.get("/analyses/any/chart.png").json()["detail"]


def test_per_minute_bucket_refuses_with_retry_after(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_analyses_per_minute=2, api_max_in_flight=100)
    key = create_key(name="k", settings=settings)
    other = create_key(name="other", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        statuses = [c.post("/analyze", json=BODY) for _ in range(3)]
    assert [s.status_code for s in statuses] == [202, 202, 429]
    # the bucket refills 2 tokens a minute: the next one comes within 30 s
    assert 1 <= int(statuses[2].headers["Retry-After"]) <= 30
    assert "2 analyses per minute" in statuses[2].json()["detail"]
    assert _count(settings, "analyses") == 2  # the refused request stored nothing
    with httpx.Client(base_url=base, headers={"X-API-Key": other}, timeout=60) as c:
        assert c.post("/analyze", json=BODY).status_code == 202  # buckets are per key


def test_in_flight_cap(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_analyses_per_minute=100, api_max_in_flight=2)
    key = create_key(name="k", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        first = [c.post("/analyze", json=BODY).json()["analysis_id"] for _ in range(2)]
        refused = c.post("/analyze", json=BODY)
        assert refused.status_code == 429 and "2 analyses in flight" in refused.json()["detail"]
        assert refused.headers["Retry-After"] == "5"
        # one finishes: there is room again
        engine = get_engine(settings.service.effective_database_url)
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE analyses SET status = 'failed' WHERE id = :id"), {"id": first[0]})
        assert c.post("/analyze", json=BODY).status_code == 202


def test_daily_llm_spend_cap_per_tenant(make_gateway: Gateway) -> None:
    base, settings = make_gateway(llm_tenant_daily_budget_usd=2.0)
    acme = create_key(name="acme", tenant="acme", settings=settings)
    globex = create_key(name="globex", tenant="globex", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": acme}, timeout=60) as c:
        analysis_id = c.post("/analyze", json=BODY).json()["analysis_id"]
        engine = get_engine(settings.service.effective_database_url)
        rows = [  # two priced calls today: 1.25 + 0.75 = 2.00 USD, the cap exactly
            {
                "id": f"llm-{i}",
                "llm_call_id": f"llm-{i}",
                "stage": "analysis",
                "agent": "technical",
                "iteration": 0,
                "model": "m",
                "status": "success",
                "attempt": 1,
                "latency_ms": 1.0,
                "analysis_id": analysis_id,
                "cost_usd": cost,
            }
            for i, cost in enumerate((1.25, 0.75))
        ]
        repo.insert_llm_calls(engine=engine, rows=rows)
        refused = c.post("/analyze", json=BODY)
        assert refused.status_code == 429, refused.text
        assert "spent 2.00 USD" in refused.json()["detail"]
        assert 1 <= int(refused.headers["Retry-After"]) <= 86_400
    with httpx.Client(base_url=base, headers={"X-API-Key": globex}, timeout=60) as c:
        assert c.post("/analyze", json=BODY).status_code == 202  # another tenant's money


def test_seconds_to_utc_midnight() -> None:
    assert seconds_to_utc_midnight(datetime(2026, 1, 1, 23, 59, 30, tzinfo=UTC)) == 30
    assert seconds_to_utc_midnight(datetime(2026, 1, 1, 0, 0, tzinfo=UTC)) == 86_400


def test_audit_rows_for_mutating_requests_only_and_never_the_key(make_gateway: Gateway) -> None:
    base, settings = make_gateway()
    key = create_key(name="alice", tenant="acme", scopes=("read", "watchlists", "admin"), settings=settings)
    other = create_key(name="bob", tenant="globex", scopes=("read", "admin"), settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}) as c:
        created = c.post(
            "/watchlists", json={"name": "tech", "tickers": ["AAPL"]}, headers={"X-Request-ID": "req-1"}
        )
        assert created.status_code == 201 and created.headers["X-Request-ID"] == "req-1"
        assert c.post("/watchlists", json={"name": "tech", "tickers": ["AAPL"]}).status_code == 409
        assert c.get("/watchlists").status_code == 200  # a read: not audited
        assert c.delete("/watchlists/tech").status_code == 204
        denied = c.post("/analyze", json=BODY)  # no analyze scope
        assert denied.status_code == 403
        no_key = httpx.post(f"{base}/watchlists", json={"name": "y", "tickers": ["AAPL"]})
        assert no_key.status_code == 401
        page = c.get("/audit").json()
    rows = page["items"]
    assert [(r["what"], r["status_code"], r["outcome"]) for r in rows] == [
        ("POST /analyze", 403, "refused"),
        ("DELETE /watchlists/{name}", 204, "ok"),
        ("POST /watchlists", 409, "refused"),
        ("POST /watchlists", 201, "ok"),
    ]
    assert rows[-1]["request_id"] == "req-1" and rows[-1]["object_id"] == "tech"
    assert {(r["key_name"], r["api_key_id"], r["tenant"]) for r in rows} == {
        ("alice", key.split("_")[1], "acme")
    }
    # another tenant's admin sees none of it
    with httpx.Client(base_url=base, headers={"X-API-Key": other}) as c:
        assert c.get("/audit").json()["items"] == []
    # the unauthenticated attempt is logged without a tenant; no row holds a key or its secret
    assert _count(settings, "audit_log") == 5
    with get_engine(settings.service.effective_database_url).connect() as conn:
        dump = json.dumps(
            [dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM audit_log"))], default=str
        )
    for token in (key, other):
        assert token not in dump and token.split("_", 2)[2] not in dump


def test_finagent_audit_cli(make_gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    from apps.cli import main
    from core.settings import get_settings

    base, settings = make_gateway()
    key = create_key(name="alice", tenant="acme", settings=settings)
    httpx.post(f"{base}/watchlists", json={"name": "t", "tickers": ["AAPL"]}, headers={"X-API-Key": key})
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", settings.service.effective_database_url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(main, ["audit", "--tenant", "acme", "--json"])
        other = CliRunner().invoke(main, ["audit", "--tenant", "globex"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.output.splitlines()]
    assert (row["key_name"], row["what"], row["object_id"], row["status_code"]) == (
        "alice",
        "POST /watchlists",
        "t",
        201,
    )
    assert key not in result.output and other.output == ""
    uuid.UUID(row["request_id"])  # a fresh id when the client sent none


def test_apikey_cli_tenant_and_scopes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from apps.cli import main
    from core.settings import get_settings

    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.sqlite3'}")
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        made = runner.invoke(main, ["apikey", "create", "ops", "--tenant", "acme", "--scopes", "read,admin"])
        bad_scope = runner.invoke(main, ["apikey", "create", "x", "--scopes", "read,root"])
        bad_tenant = runner.invoke(main, ["apikey", "create", "y", "--tenant", "Acme Corp"])
        listed = runner.invoke(main, ["apikey", "list"])
    finally:
        get_settings.cache_clear()
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert bad_scope.exit_code == bad_tenant.exit_code == 2
    assert "root" in bad_scope.output and "Acme Corp" in bad_tenant.output
    (line,) = listed.stdout.splitlines()  # the refused keys were not created
    assert line.split("\t")[:4] == ["ops", f"fa_{token.split('_')[1]}_…", "acme", "read,admin"]
    assert token not in listed.output


def test_an_unexpected_error_keeps_the_error_shape_and_is_audited(
    make_gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps import watchlists

    def bug(**_: Any) -> None:
        raise RuntimeError("a bug")

    base, settings = make_gateway()
    key = create_key(name="k", settings=settings)
    monkeypatch.setattr(watchlists, "create_watchlist", bug)  # the server thread shares the module
    response = httpx.post(
        f"{base}/watchlists",
        json={"name": "t", "tickers": ["AAPL"]},
        headers={"X-API-Key": key, "X-Request-ID": "req-9"},
    )
    assert response.status_code == 500, response.text
    assert response.json() == {"detail": "internal error (request id req-9)"}
    (row,) = rows = ops_audit(settings)
    assert (row["what"], row["status_code"], row["outcome"], row["request_id"]) == (
        "POST /watchlists",
        500,
        "error",
        "req-9",
    ), rows


def ops_audit(settings: Settings) -> list[dict[str, Any]]:
    from db import ops_repo

    return ops_repo.list_audit(engine=get_engine(settings.service.effective_database_url))


def test_concurrent_requests_of_one_key_never_pass_the_in_flight_cap(make_gateway: Gateway) -> None:
    from concurrent.futures import ThreadPoolExecutor

    base, settings = make_gateway(api_analyses_per_minute=100, api_max_in_flight=2)
    key = create_key(name="k", settings=settings)

    def post(_: int) -> int:
        return httpx.post(f"{base}/analyze", json=BODY, headers={"X-API-Key": key}, timeout=60).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(post, range(8)))
    assert sorted(statuses) == [202, 202] + [429] * 6
    assert _count(settings, "analyses") == 2
