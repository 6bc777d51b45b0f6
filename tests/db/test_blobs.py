"""Content-addressed tool results (``db.blobs``) and retention (``db.retention``), on a real
SQLite file and a real PostgreSQL database.

The bars are hand-written (a few days of two months, prices chosen to be easy to check), not a
market: the tests check how rows are cut and put back, not what the numbers mean.
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from db import blobs, ledger, repo
from db.attempt_rows import CONTENT_BLOBS, TOOL_CALLS
from db.engine import get_engine, json_dumps
from db.retention import cutoff, purge
from tests.support.rows import finish_row


def _bar(day: str, close: float, adjusted: float) -> dict[str, Any]:
    return {"timestamp": day, "open": close - 1, "high": close + 1, "low": close - 2, "close": close,
            "volume": 1000, "adjusted_close": adjusted}  # fmt: skip


def _history(days: list[str], factor: float, pad: str = "x") -> dict[str, Any]:
    """A get_history-shaped result. A bar's close is month × 100 + day (2014-02-03 → 203.0), so
    a day's bar is the same in every window; ``adjusted_close`` = close × ``factor`` (in the
    real tool it depends on the analysis date). 40 bytes of padding per bar (``pad``: another
    character, other pieces) make the list longer than 1 KB; the padding comes before
    ``adjusted_close``, which the tool puts last."""
    bars = []
    for d in days:
        close = float(int(d[5:7]) * 100 + int(d[8:10]))
        bar = _bar(d, close, close * factor)
        adjusted = bar.pop("adjusted_close")
        bars.append({**bar, "note": pad * 40, "adjusted_close": adjusted})
    return {"symbol": "AAPL", "count": len(bars), "history": bars, "source": "hand-written"}


JAN = [f"2014-01-{d:02d}" for d in (27, 28, 29, 30, 31)]
FEB = [f"2014-02-{d:02d}" for d in (3, 4, 5, 6, 7)]
MAR = [f"2014-03-{d:02d}" for d in (3, 4)]


def test_split_then_join_gives_the_result_back_with_its_key_order() -> None:
    result = _history(JAN + FEB, factor=0.5)
    cut = blobs.split(result)
    # two pieces: the January bars and the February bars, without adjusted_close
    assert len(cut.refs) == 2
    pieces = [cut.blobs[h] for h in cut.refs]
    assert [len(p) for p in pieces] == [5, 5]
    assert [p[0]["close"] for p in pieces] == [127.0, 203.0]
    assert all("adjusted_close" not in bar for p in pieces for bar in p)
    # the skeleton keeps the date-dependent column: closes 127..131 and 203..207, halved
    column = cut.skeleton["history"]["$rows"]["columns"]["adjusted_close"]
    assert column == [63.5, 64.0, 64.5, 65.0, 65.5, 101.5, 102.0, 102.5, 103.0, 103.5]
    back = blobs.join(cut.skeleton, cut.blobs)
    assert back == result
    assert [list(b) for b in back["history"]] == [list(b) for b in result["history"]]


def test_overlapping_windows_share_their_full_months() -> None:
    # two analyses a few days apart, each with its own adjustment: windows Jan 27..Feb 7 and
    # Jan 29..Mar 4
    first = blobs.split(_history(JAN + FEB, factor=0.5))
    second = blobs.split(_history(JAN[2:] + FEB + MAR, factor=0.25))
    assert len(second.refs) == 3
    assert first.refs[1] == second.refs[1]  # February: one piece for both
    assert first.refs[0] != second.refs[0]  # January: the windows start on different days
    assert blobs.join(second.skeleton, {**first.blobs, **second.blobs}) == _history(JAN[2:] + FEB + MAR, 0.25)


def _with_source(days: list[str], scale: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """A window whose ``adjusted_close`` is the source's adjusted close (close / 7 + 0.1: the
    same in every window) times the window's ``scale``, as ``get_history`` computes it; and
    the tool's ``storage_basis`` for it."""
    result = _history(days, 1.0)
    base = [bar["close"] / 7 + 0.1 for bar in result["history"]]
    for bar, value in zip(result["history"], base, strict=True):
        bar["adjusted_close"] = value * scale
    return result, {"history": {"adjusted_close": {"base": base, "scale": scale}}}


def test_a_basis_shares_the_source_values_and_reads_back_the_same_numbers() -> None:
    (first, b1), (second, b2) = _with_source(JAN + FEB, 1 / 3), _with_source(JAN[2:] + FEB + MAR, 0.7)
    one, two = blobs.split(first, basis=b1), blobs.split(second, basis=b2)
    # the skeleton keeps one factor, not a value per bar; February is one piece for both
    assert two.skeleton["history"]["$rows"]["columns"] == {"adjusted_close": {"scale": 0.7}}
    assert one.refs[1] == two.refs[1]
    pieces = {**one.blobs, **two.blobs}
    for result, cut in ((first, one), (second, two)):
        back = blobs.join(cut.skeleton, pieces)
        assert json_dumps(back) == json_dumps(result)  # same keys, order and float bits
    # a basis that does not give every value exactly is not used: the column stays
    (third, b3) = _with_source(JAN + FEB, 0.7)
    third["history"][2]["adjusted_close"] += 1e-9
    cut = blobs.split(third, basis=b3)
    assert isinstance(cut.skeleton["history"]["$rows"]["columns"]["adjusted_close"], list)
    assert blobs.join(cut.skeleton, cut.blobs) == third


def test_small_lists_and_marker_shaped_values_stay_inline() -> None:
    small = {"history": [_bar("2014-01-02", 1.0, 1.0)]}
    assert blobs.split(small).refs == []
    tricky = {"$concat": ["not a hash"], "history": _history(JAN + FEB, 1.0)["history"]}
    assert blobs.split({"x": {"$concat": ["a"]}, **tricky}).refs == []
    undated = {"contracts": [{"strike": float(k), "bid": 1.0, "pad": "y" * 40} for k in range(40)]}
    cut = blobs.split(undated)
    assert len(cut.refs) == 1 and cut.blobs[cut.refs[0]] == undated["contracts"]


def test_a_missing_piece_is_a_key_error_naming_it() -> None:
    cut = blobs.split(_history(JAN + FEB, 1.0))
    with pytest.raises(KeyError, match=cut.refs[1]):
        blobs.join(cut.skeleton, {cut.refs[0]: cut.blobs[cut.refs[0]]})


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> Engine:
    """A migrated database of its own per test (these tests count every piece of
    ``content_blobs``, so the session's shared PostgreSQL database would see other tests' rows)."""
    if request.param == "sqlite":
        return get_engine(str(request.getfixturevalue("sqlite_url")))
    return get_engine(str(request.getfixturevalue("make_pg_database")(migrated=True)))


def _analysis(engine: Engine, symbol: str = "AAPL") -> str:
    analysis_id = str(uuid.uuid4())
    state = {"analysis_id": analysis_id, "stock_symbol": symbol, "user_query": "q", "iteration": 0,
             "max_iterations": 1, "status": "researching", "as_of": "2014-03-04"}  # fmt: skip
    assert ledger.create(
        engine=engine, analysis_id=analysis_id, symbol=symbol, as_of=date(2014, 3, 4),
        user_query="q", max_iterations=1, state=state,
    )  # fmt: skip
    return analysis_id


def _store(engine: Engine, analysis_id: str, result: dict[str, Any], *, report: str = "# report") -> None:
    row = {"tool_call_id": f"{analysis_id}:history", "stage": "research", "tool": "get_history",
           "status": "success", "attempt": 1, "latency_ms": 1.0, "result": result}  # fmt: skip
    state = {"analysis_id": analysis_id, "final_report": report, "status": "done"}
    finish_row(engine, analysis_id, state=state, tool_calls=[row], report=report)


def test_rows_store_pieces_once_and_read_whole(engine: Engine) -> None:
    a, b = _analysis(engine), _analysis(engine)
    first, second = _history(JAN + FEB, 0.5), _history(JAN + FEB, 0.25)
    _store(engine, a, copy.deepcopy(first))
    _store(engine, b, copy.deepcopy(second))
    # two analyses, two pieces in all (January, February): stored once
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(CONTENT_BLOBS)).scalar_one() == 2
    (row,) = repo.get_tool_calls(engine=engine, analysis_id=a)
    assert row["result"] == first and len(row["result_refs"]) == 2
    assert repo.get_tool_result(engine=engine, tool_call_id=f"{b}:history") == second
    assert repo.get_tool_results(engine=engine, tool_call_ids=[f"{a}:history"]) == {f"{a}:history": first}
    # the finished state reads with its final report although the row stores it once
    stored = repo.get_analysis(engine=engine, analysis_id=a)
    assert stored is not None and stored["state"]["final_report"] == "# report"
    with engine.connect() as conn:
        raw = conn.execute(sa.select(repo.ANALYSES.c.state).where(repo.ANALYSES.c.id == a)).scalar_one()
    assert raw["final_report"] == repo.REPORT_IN_COLUMN


def test_a_stored_piece_is_the_text_its_hash_is_over(engine: Engine) -> None:
    # given a result cut into two pieces, written by a step's end
    a = _analysis(engine)
    result = _history(JAN + FEB, 0.5)
    _store(engine, a, copy.deepcopy(result))
    # then each piece's column holds the JSON text the hash was taken over, and its length
    text_of = sa.cast(CONTENT_BLOBS.c.body, sa.Text)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(CONTENT_BLOBS.c.hash, text_of, CONTENT_BLOBS.c.bytes)).all()
    assert len(rows) == 2
    for key, text, size in rows:
        assert blobs.digest(text) == key and size == len(text)
    # the pieces: each month's bars without the date-dependent adjusted close
    stable = [{k: v for k, v in bar.items() if k != "adjusted_close"} for bar in result["history"]]
    months = sorted(
        json_dumps([b for b in stable if b["timestamp"][:7] == m]) for m in ("2014-01", "2014-02")
    )
    assert sorted(text for _, text, _ in rows) == months


def test_rows_written_before_the_pieces_still_read(engine: Engine) -> None:
    # a row as migration 0018 left it: the whole result in ``result``, no refs
    a = _analysis(engine)
    result = _history(JAN + FEB, 0.5)
    _store(engine, a, {"tiny": 1})
    with engine.begin() as conn:
        conn.execute(sa.update(TOOL_CALLS).where(TOOL_CALLS.c.analysis_id == a).values(result=result))
    assert repo.get_tool_result(engine=engine, tool_call_id=f"{a}:history") == result


def test_purge_deletes_old_finished_analyses_and_only_unused_pieces(engine: Engine) -> None:
    old, kept, running = _analysis(engine), _analysis(engine), _analysis(engine)
    pad = uuid.uuid4().hex[0]  # pieces of this test only (the PostgreSQL database is shared)
    _store(engine, old, _history(JAN + FEB, 0.5, pad))  # January + February
    _store(engine, kept, _history(FEB + MAR, 0.5, pad))  # February (shared) + March
    march_and_feb = set(repo.get_tool_calls(engine=engine, analysis_id=kept)[0]["result_refs"])
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id.in_([old, running]))
            .values(created_at=datetime(2020, 1, 1, tzinfo=UTC))
        )
    # the dry run counts: one analysis (the running one is not finished), one row, one piece
    dry = purge(engine=engine, before=date(2021, 1, 1), dry_run=True)
    assert (dry.analyses, dry.tool_calls, dry.blobs) == (1, 1, 1)
    assert repo.get_analysis(engine=engine, analysis_id=old) is not None
    done = purge(engine=engine, before=date(2021, 1, 1))
    assert (done.analyses, done.tool_calls, done.blobs) == (1, 1, 1)
    assert repo.get_analysis(engine=engine, analysis_id=old) is None
    assert repo.get_tool_calls(engine=engine, analysis_id=old) == []
    assert repo.get_analysis(engine=engine, analysis_id=running) is not None
    january = set(blobs.split(_history(JAN, 0.5, pad)).refs)
    with engine.connect() as conn:
        left = set(conn.execute(sa.select(CONTENT_BLOBS.c.hash)).scalars())
    assert march_and_feb <= left and not january & left
    assert repo.get_tool_result(engine=engine, tool_call_id=f"{kept}:history") == _history(
        FEB + MAR, 0.5, pad
    )
    # nothing more to purge
    assert purge(engine=engine, before=date(2021, 1, 1)).analyses == 0


def test_cutoff_is_midnight_utc() -> None:
    assert cutoff(date(2024, 5, 1)) == datetime(2024, 5, 1, tzinfo=UTC)
    assert cutoff(datetime(2024, 5, 1, 12)) == datetime(2024, 5, 1, 12, tzinfo=UTC)
