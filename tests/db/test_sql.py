"""``db._sql``: an insert-if-absent names every unique constraint its table has."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from db._sql import insert_ignore, unique_constraints
from db.ops_repo import RUN_CLAIM_CONSTRAINTS, RUNS
from db.repo import ITERATIONS
from db.trading_repo import ACCOUNT_CLAIM_CONSTRAINTS, ACCOUNTS


def _reflected_unique(engine: Engine, table: str) -> set[str]:
    inspector = sa.inspect(engine)
    names = {inspector.get_pk_constraint(table)["name"]}
    names.update(c["name"] for c in inspector.get_unique_constraints(table))
    names.update(i["name"] for i in inspector.get_indexes(table) if i["unique"])
    return names


def test_the_named_claim_constraints_are_the_migrated_ones(engine: Engine) -> None:
    # the names in code are the ones the migrations created, on both backends
    assert _reflected_unique(engine, "watchlist_runs") == set(RUN_CLAIM_CONSTRAINTS)
    assert _reflected_unique(engine, "accounts") == set(ACCOUNT_CLAIM_CONSTRAINTS)
    assert _reflected_unique(engine, "analysis_iterations") == {"pk_analysis_iterations"}


def test_insert_ignore_refuses_a_claim_that_leaves_a_unique_constraint_out(engine: Engine) -> None:
    with engine.connect() as conn:
        # the primary key alone (the old watchlist-run claim) or the pair alone: both racy
        with pytest.raises(ValueError, match="uq_watchlist_runs_watchlist_id_run_date"):
            insert_ignore(conn, RUNS)
        with pytest.raises(ValueError, match="pk_watchlist_runs"):
            insert_ignore(conn, RUNS, constraints=["uq_watchlist_runs_watchlist_id_run_date"])
        # every one named: ON CONFLICT DO NOTHING with no target (all are arbiters)
        sql = str(insert_ignore(conn, RUNS, constraints=RUN_CLAIM_CONSTRAINTS).compile(dialect=conn.dialect))
        assert sql.endswith("ON CONFLICT DO NOTHING")
        # a table whose primary key is its one unique constraint keeps the targeted form
        sql = str(insert_ignore(conn, ITERATIONS).compile(dialect=conn.dialect))
        assert sql.endswith("ON CONFLICT (analysis_id, iteration) DO NOTHING")
    assert unique_constraints(ACCOUNTS) == frozenset(ACCOUNT_CLAIM_CONSTRAINTS)
