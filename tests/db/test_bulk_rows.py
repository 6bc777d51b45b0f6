"""Bulk producer rows (``db.ledger.create_and_claim_many``, ``db.backtest_repo.add_items``) on a
real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import uuid
from datetime import date

from sqlalchemy import Engine

from db import backtest_repo, ledger, repo


def _new(analysis_id: str) -> ledger.NewAnalysis:
    state = {"analysis_id": analysis_id, "stock_symbol": "AAPL", "iteration": 0, "status": "queued"}
    return ledger.NewAnalysis(
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2014, 1, 2),
        user_query="q",
        max_iterations=1,
        state=state,
    )


def test_create_and_claim_many_claims_each_id_once(engine: Engine) -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    assert ledger.create_and_claim_many(engine=engine, analyses=[_new(i) for i in ids[:2]]) == set(ids[:2])
    # a repeated producer: the two known ids are claimed already, only the new one is returned
    assert ledger.create_and_claim_many(engine=engine, analyses=[_new(i) for i in ids]) == {ids[2]}
    for analysis_id in ids:
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None and row["status"] == "queued" and row["lease_expires_at"] is not None
    assert ledger.create_and_claim_many(engine=engine, analyses=[]) == set()


def test_add_items_inserts_each_point_once(engine: Engine) -> None:
    name = f"bt-{uuid.uuid4().hex[:8]}"
    backtest_repo.create_backtest(
        engine=engine, name=name, symbols=["AAPL"], start_date=date(2014, 1, 1), end_date=date(2014, 1, 31),
        every="5d", analysis_type="composite",
    )  # fmt: skip
    first = {"symbol": "AAPL", "as_of": date(2014, 1, 2), "requested_date": date(2014, 1, 1),
             "status": "refused", "error": "no bars"}  # fmt: skip
    second = {**first, "as_of": date(2014, 1, 6), "requested_date": date(2014, 1, 6), "status": "enqueued",
              "analysis_id": "a-1", "error": None}  # fmt: skip
    assert backtest_repo.add_items(engine=engine, backtest_name=name, items=[first]) == 1
    assert backtest_repo.add_items(engine=engine, backtest_name=name, items=[first, second]) == 1
    stored = {
        (i["as_of"], i["status"], i["analysis_id"])
        for i in backtest_repo.items(engine=engine, backtest_name=name)
    }
    assert stored == {(date(2014, 1, 2), "refused", None), (date(2014, 1, 6), "enqueued", "a-1")}
