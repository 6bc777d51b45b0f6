"""Analysis statuses come from the stage table (``pipeline.core.stages``): the repository
accepts exactly those, the database itself no longer repeats the list (migration 0005), and
the no-regress rank follows the table's order."""

from __future__ import annotations

from datetime import date

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from db import repo
from db.migrate import downgrade, upgrade
from pipeline.core.stages import STAGES, Status


def _new(engine: Engine, analysis_id: str) -> None:
    repo.create_analysis(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="Analyze AAPL",
        max_iterations=3,
        state={},
    )


def test_repo_refuses_a_status_outside_the_stage_table(engine: Engine) -> None:
    _new(engine, "a-1")
    with pytest.raises(ValueError, match="status must be one of"):
        repo.save_stage(
            engine=engine, analysis_id="a-1", state=None, status="thinking", iteration=0, tool_calls=[]
        )
    assert repo.get_analysis(engine=engine, analysis_id="a-1")["status"] == "researching"


def test_status_moves_forward_in_table_order_only(engine: Engine) -> None:
    _new(engine, "a-2")
    last = STAGES[-1].status.value
    repo.save_stage(engine=engine, analysis_id="a-2", state=None, status=last, iteration=0, tool_calls=[])
    # an earlier stage of the same pass (a late redelivery) does not move the row back
    repo.save_stage(
        engine=engine,
        analysis_id="a-2",
        state=None,
        status=STAGES[0].status.value,
        iteration=0,
        tool_calls=[],
    )
    assert repo.get_analysis(engine=engine, analysis_id="a-2")["status"] == last
    # the next pass starts over at the first stage
    repo.save_stage(
        engine=engine,
        analysis_id="a-2",
        state=None,
        status=STAGES[0].status.value,
        iteration=1,
        tool_calls=[],
    )
    row = repo.get_analysis(engine=engine, analysis_id="a-2")
    assert (row["status"], row["iteration"]) == (Status.RESEARCHING.value, 1)


def test_migration_0005_drops_the_check_and_downgrade_restores_it(empty_db_url: str) -> None:
    upgrade(url=empty_db_url, revision="0004")
    insert = sa.text(
        "INSERT INTO analyses (id, symbol, as_of, user_query, status, iteration, max_iterations, state) "
        "VALUES (:id, 'AAPL', '2012-06-29', 'q', 'thinking', 0, 3, '{}')"
    )
    engine = sa.create_engine(empty_db_url)
    try:
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"id": "x-1"})
        upgrade(url=empty_db_url, revision="0005")
        with engine.begin() as conn:
            conn.execute(insert, {"id": "x-2"})
            conn.execute(sa.text("DELETE FROM analyses"))
        downgrade(url=empty_db_url, revision="0004")
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"id": "x-3"})
    finally:
        engine.dispose()
