"""Migration 0007 and the tenancy/audit repository functions, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from db import ledger, ops_repo, repo
from db.engine import get_engine
from db.migrate import upgrade


def test_0007_moves_existing_rows_to_the_default_tenant(empty_db_url: str) -> None:
    upgrade(url=empty_db_url, revision="0006")
    engine = sa.create_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO analyses (id, symbol, as_of, user_query, status, iteration, max_iterations,"
                    " state) VALUES ('a-1', 'AAPL', '2012-06-29', 'q', 'done', 0, 3, '{}')"
                )
            )
            conn.execute(sa.text("INSERT INTO api_keys (key_id, name, key_hash) VALUES ('k1', 'old', 'h')"))
            conn.execute(
                sa.text(
                    "INSERT INTO watchlists (id, name, tickers, schedule, timezone, options)"
                    " VALUES ('w-1', 'tech', '[\"AAPL\"]', '30 21 * * 1-5', 'UTC', '{}')"
                )
            )
        upgrade(url=empty_db_url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT tenant, api_key_id FROM analyses")).one() == ("default", None)
            key = conn.execute(sa.text("SELECT tenant, scopes FROM api_keys")).one()
            assert tuple(key) == ("default", "read,analyze,watchlists")  # today's rights minus admin
            assert conn.execute(sa.text("SELECT tenant FROM watchlists")).scalar_one() == "default"
    finally:
        engine.dispose()


def _watchlist(engine: Engine, *, wid: str, name: str, tenant: str) -> dict:
    return ops_repo.create_watchlist(
        engine=engine,
        watchlist_id=wid,
        name=name,
        tickers=["AAPL"],
        schedule="30 21 * * 1-5",
        timezone="UTC",
        options={},
        tenant=tenant,
    )


def test_watchlist_names_are_unique_per_tenant(engine: Engine) -> None:
    # unique ids, names and tenants: the PostgreSQL database is shared by the session's tests
    u = uuid.uuid4().hex[:8]
    acme, globex, name = f"acme-{u}", f"globex-{u}", f"tech-{u}"
    _watchlist(engine, wid=f"w1-{u}", name=name, tenant=acme)
    _watchlist(engine, wid=f"w2-{u}", name=name, tenant=globex)  # same name, other tenant: fine
    with pytest.raises(ops_repo.DuplicateNameError):
        _watchlist(engine, wid=f"w3-{u}", name=name, tenant=acme)
    assert ops_repo.get_watchlist(engine=engine, name=name, tenant=acme)["id"] == f"w1-{u}"
    assert ops_repo.get_watchlist(engine=engine, name=name) is None  # the default tenant has none
    assert not ops_repo.delete_watchlist(engine=engine, name=name, tenant=f"initech-{u}")
    changed = ops_repo.update_watchlist(
        engine=engine, name=name, tenant=f"initech-{u}", changes={"enabled": False}
    )
    assert changed is None
    assert [w["id"] for w in ops_repo.list_watchlists(engine=engine, tenant=globex)] == [f"w2-{u}"]
    everyone = {w["id"] for w in ops_repo.list_watchlists(engine=engine)}  # beat: every tenant's
    assert {f"w1-{u}", f"w2-{u}"} <= everyone


@pytest.fixture
def fresh(empty_db_url: str) -> Engine:
    """A migrated database of its own (these tests count and sum over whole tables)."""
    upgrade(url=empty_db_url)
    return get_engine(empty_db_url)


def test_in_flight_and_tenant_spend(fresh: Engine) -> None:
    engine = fresh

    def analysis(aid: str, tenant: str, key: str | None) -> None:
        ledger.create_and_claim(
            engine=engine,
            analysis_id=aid,
            symbol="AAPL",
            as_of="2012-06-29",
            user_query="q",
            max_iterations=1,
            state={},
            tenant=tenant,
            api_key_id=key,
        )

    analysis("a1", "acme", "k1")
    analysis("a2", "acme", "k1")
    analysis("a3", "globex", "k2")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE analyses SET status = 'done' WHERE id = 'a2'"))
    assert repo.count_in_flight(engine=engine, api_key_id="k1") == 1
    assert repo.count_in_flight(engine=engine, api_key_id="k2") == 1
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    base = {"stage": "analysis", "agent": "t", "iteration": 0, "model": "m", "status": "success"}
    rows = [
        {
            **base,
            "id": "c1",
            "llm_call_id": "c1",
            "attempt": 1,
            "latency_ms": 1,
            "analysis_id": "a1",
            "cost_usd": 0.5,
            "timestamp": now,
        },
        {
            **base,
            "id": "c2",
            "llm_call_id": "c2",
            "attempt": 1,
            "latency_ms": 1,
            "analysis_id": "a2",
            "cost_usd": 0.25,
            "timestamp": now,
        },
        {
            **base,
            "id": "c3",
            "llm_call_id": "c3",
            "attempt": 1,
            "latency_ms": 1,
            "analysis_id": "a2",
            "cost_usd": 4.0,
            "timestamp": now - timedelta(days=1),
        },  # yesterday: not counted
        {
            **base,
            "id": "c4",
            "llm_call_id": "c4",
            "attempt": 1,
            "latency_ms": 1,
            "analysis_id": "a2",
            "cost_usd": None,
            "timestamp": now,
        },  # unknown price: 0
        {
            **base,
            "id": "c5",
            "llm_call_id": "c5",
            "attempt": 1,
            "latency_ms": 1,
            "analysis_id": "a3",
            "cost_usd": 9.0,
            "timestamp": now,
        },  # another tenant
    ]
    repo.insert_llm_calls(engine=engine, rows=rows)
    midnight = now.replace(hour=0)
    assert repo.tenant_llm_spend(engine=engine, tenant="acme", since=midnight) == pytest.approx(0.75)
    assert repo.tenant_llm_spend(engine=engine, tenant="initech", since=midnight) == 0.0


def test_audit_rows_and_outcomes(fresh: Engine) -> None:
    engine = fresh
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    for i, (tenant, code) in enumerate([("acme", 201), ("acme", 404), ("globex", 500), (None, 401)]):
        ops_repo.insert_audit(
            engine=engine,
            audit_id=f"a{i}",
            request_id=f"r{i}",
            method="POST",
            what="POST /watchlists",
            status_code=code,
            tenant=tenant,
            at=t0 + timedelta(seconds=i),
        )
    acme = ops_repo.list_audit(engine=engine, tenant="acme")
    assert [(r["request_id"], r["outcome"]) for r in acme] == [("r1", "refused"), ("r0", "ok")]
    everything = ops_repo.list_audit(engine=engine)
    assert [r["outcome"] for r in everything] == ["refused", "error", "refused", "ok"]
    assert [r["id"] for r in ops_repo.list_audit(engine=engine, since=t0 + timedelta(seconds=2))] == [
        "a3",
        "a2",
    ]
    with pytest.raises(ValueError, match="limit"):
        ops_repo.list_audit(engine=engine, limit=0)
