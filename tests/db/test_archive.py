"""The archive of finished analyses (``db.archive``), on a real SQLite file and a real
PostgreSQL database: what is archived, that every read returns what it returned before, the
dictionary, retention of the pieces an archive uses, and that an archived record is final.

The bars and quotes are hand-written (a few days, prices easy to check), not a market: the
tests check how records are moved and read back, not what the numbers mean.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
import zstandard
from sqlalchemy import Engine

from db import archive, ledger, repo
from db.attempt_rows import CONTENT_BLOBS, TOOL_CALLS
from db.engine import get_engine, json_dumps
from db.retention import purge
from tests.support.rows import finish_row

DAYS = [f"2014-0{m}-{d:02d}" for m in (1, 2, 3) for d in (6, 7, 8, 9, 10)]


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> Engine:
    """A migrated database of its own per test (the tests count archives and dictionaries)."""
    if request.param == "sqlite":
        return get_engine(str(request.getfixturevalue("sqlite_url")))
    return get_engine(str(request.getfixturevalue("make_pg_database")(migrated=True)))


def _history(pad: str) -> dict[str, Any]:
    bars = [
        {"timestamp": day, "close": 100.0 + i, "volume": 1000 + i, "note": pad * 40}
        for i, day in enumerate(DAYS)
    ]
    return {"symbol": "AAPL", "bars": bars}


def _quote(analysis_id: str) -> dict[str, Any]:
    return {"symbol": "AAPL", "price": 101.25, "as_of": "2014-03-10", "exchange": "NASDAQ", "id": analysis_id}


def _finished(engine: Engine, *, pad: str = "x", report: str = "# AAPL\n\nHOLD") -> str:
    """A finished analysis: a quote the state copies (stored as a reference), a history cut into
    pieces, a failed then a successful attempt, a Markdown report and a report JSON."""
    analysis_id = str(uuid.uuid4())
    state = {"analysis_id": analysis_id, "stock_symbol": "AAPL", "user_query": "q", "iteration": 0,
             "max_iterations": 1, "status": "researching", "as_of": "2014-03-10",
             "analysis_type": "stock"}  # fmt: skip
    assert ledger.create(
        engine=engine, analysis_id=analysis_id, symbol="AAPL", as_of=date(2014, 3, 10),
        user_query="q", max_iterations=1, state=state,
    )  # fmt: skip
    quote_id, history_id = f"{analysis_id}:quote", f"{analysis_id}:history"
    rows = [
        {"tool_call_id": quote_id, "stage": "research", "tool": "get_stock_data", "status": "error",
         "attempt": 1, "latency_ms": 5.0, "error": "timeout", "error_code": "TIMEOUT"},
        {"tool_call_id": quote_id, "stage": "research", "tool": "get_stock_data", "status": "success",
         "attempt": 2, "latency_ms": 1.5, "result": _quote(analysis_id)},
        {"tool_call_id": history_id, "stage": "research", "tool": "get_history", "status": "success",
         "attempt": 1, "latency_ms": 2.0, "result": _history(pad)},
    ]  # fmt: skip
    final = {**state, "status": "done", "final_report": report, "stock_data": {"quote": _quote(analysis_id)}}
    report_json = {
        "analysis_id": analysis_id, "signal": "HOLD", "score": 0.1, "p_outperform": 0.52,
        "author": {"kind": "deterministic"},
        "probability": {"signal_horizon": 20, "horizons": {"20": {"p": 0.52, "rows": 300}}},
        "views": {"social": {"label": "bullish", "score": 0.3, "posts": 12}, "chart": {"trend": "up"}},
        "rationale": ["price 101.25 [quote]"], "quote": _quote(analysis_id),
    }  # fmt: skip
    finish_row(
        engine, analysis_id, state=final, tool_calls=rows, report=report, report_json=report_json,
        signal="HOLD", confidence=0.52,
    )  # fmt: skip
    return analysis_id


def _reads(engine: Engine, analysis_id: str) -> str:
    """Everything the repository returns for an analysis, as JSON text (order included)."""
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    row.pop("archived_at")
    return json_dumps(
        [
            row,
            repo.get_tool_calls(engine=engine, analysis_id=analysis_id),
            repo.get_tool_result(
                engine=engine, tool_call_id=f"{analysis_id}:history", analysis_id=analysis_id
            ),
            repo.get_tool_result(engine=engine, tool_call_id=f"{analysis_id}:quote", analysis_id=analysis_id),
        ]
    )


def _soon() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=5)


def test_an_archived_analysis_reads_exactly_as_before(engine: Engine) -> None:
    analysis_id = _finished(engine)
    with engine.connect() as conn:
        stored = conn.execute(
            sa.select(repo.ANALYSES.c.state).where(repo.ANALYSES.c.id == analysis_id)
        ).scalar_one()
    assert stored["stock_data"]["quote"] == {"$result": [f"{analysis_id}:quote"]}, (
        "the state references the quote"
    )
    before = _reads(engine, analysis_id)

    report = archive.archive(engine=engine, before=_soon())

    assert (report.analyses, report.tool_calls, report.trained) == (1, 3, False)
    assert report.dictionary is None and 0 < report.stored_bytes < report.raw_bytes
    assert _reads(engine, analysis_id) == before
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(TOOL_CALLS)).scalar_one() == 0
        row = conn.execute(sa.select(repo.ANALYSES).where(repo.ANALYSES.c.id == analysis_id)).mappings().one()
    # what SQL reads inside the columns stays; the rest is in the archive
    assert row["archived_at"] is not None and row["report"] is None
    assert row["state"] == {"analysis_type": "stock"}
    assert row["report_json"] == {
        "score": 0.1, "p_outperform": 0.52, "probability": {"horizons": {"20": {"p": 0.52}}},
        "author": {"kind": "deterministic"},
        "views": {"social": {"label": "bullish", "score": 0.3}, "chart": {}},
    }  # fmt: skip
    assert [r["id"] for r in repo.list_analyses(engine=engine, analysis_type="stock")] == [analysis_id]
    # archived once: a second run finds nothing
    assert archive.archive(engine=engine, before=_soon()).analyses == 0


def test_only_finished_analyses_finished_before_the_cutoff_are_archived(engine: Engine) -> None:
    old, recent = _finished(engine), _finished(engine)
    running = str(uuid.uuid4())
    assert ledger.create(
        engine=engine, analysis_id=running, symbol="MSFT", as_of=date(2014, 3, 10),
        user_query="q", max_iterations=1, state={"analysis_id": running},
    )  # fmt: skip
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id == old)
            .values(finished_at=datetime(2020, 1, 1, tzinfo=UTC))
        )
    dry = archive.archive(engine=engine, before=datetime(2021, 1, 1, tzinfo=UTC), dry_run=True)
    assert dry.analyses == 1 and dry.dry_run
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(archive.ARCHIVES)).scalar_one() == 0

    assert archive.archive(engine=engine, before=datetime(2021, 1, 1, tzinfo=UTC)).analyses == 1

    archived = {
        r["id"]: r["archived_at"] is not None
        for r in (repo.get_analysis(engine=engine, analysis_id=i) for i in (old, recent, running))
        if r is not None
    }
    assert archived == {old: True, recent: False, running: False}


def test_records_after_the_first_batch_use_a_dictionary_trained_on_it(engine: Engine) -> None:
    ids = [_finished(engine, pad=f"{i:02d}") for i in range(archive.MIN_TRAIN_SAMPLES)]
    with pytest.raises(ValueError, match="at least"):
        archive.train(engine=engine)  # nothing archived yet

    first = archive.archive(engine=engine, before=_soon())

    assert first.trained and first.dictionary is not None and first.analyses == len(ids)
    late = _finished(engine, pad="zz")
    second = archive.archive(engine=engine, before=_soon())
    assert (second.analyses, second.trained, second.dictionary) == (1, False, first.dictionary)
    with engine.connect() as conn:
        used = dict(
            conn.execute(sa.select(archive.ARCHIVES.c.analysis_id, archive.ARCHIVES.c.dictionary_id)).all()
        )
    assert set(used.values()) == {first.dictionary} and late in used
    # the frame needs its dictionary: without it zstd refuses
    with engine.connect() as conn:
        body = conn.execute(
            sa.select(archive.ARCHIVES.c.body).where(archive.ARCHIVES.c.analysis_id == late)
        ).scalar_one()
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(bytes(body))
    assert repo.get_tool_result(engine=engine, tool_call_id=f"{late}:history", analysis_id=late) == _history(
        "zz"
    )
    # a new dictionary from the archived records; later archives use it
    newer = archive.train(engine=engine)
    _finished(engine, pad="yy")
    assert archive.archive(engine=engine, before=_soon()).dictionary == newer


def test_purge_keeps_the_pieces_an_archive_uses(engine: Engine) -> None:
    pad = uuid.uuid4().hex[0]
    gone, kept = _finished(engine, pad=pad), _finished(engine, pad=pad + pad)
    with engine.begin() as conn:  # created in 2020 (before it was archived: created_at never changes)
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id == gone)
            .values(created_at=datetime(2020, 1, 1, tzinfo=UTC))
        )
    kept_reads = _reads(engine, kept)
    archive.archive(engine=engine, before=_soon())
    with engine.connect() as conn:
        pieces_before = set(conn.execute(sa.select(CONTENT_BLOBS.c.hash)).scalars())
        packed = conn.execute(sa.select(sa.func.count()).where(CONTENT_BLOBS.c.body.is_(None))).scalar_one()
    assert packed == len(pieces_before) > 0, "the archive packs the pieces its records use"

    done = purge(engine=engine, before=date(2021, 1, 1))

    assert (done.analyses, done.archives) == (1, 1) and done.blobs > 0
    with engine.connect() as conn:
        left = set(conn.execute(sa.select(CONTENT_BLOBS.c.hash)).scalars())
        archives = conn.execute(sa.select(archive.ARCHIVES.c.analysis_id)).scalars().all()
    assert archives == [kept] and left < pieces_before
    assert _reads(engine, kept) == kept_reads


def test_a_live_result_whose_pieces_an_archive_packed_reads_whole(engine: Engine) -> None:
    # given an archived analysis whose history pieces were packed, and a live analysis whose
    # history is the same bars (the same pieces, stored once)
    pad = uuid.uuid4().hex[0]
    archive.archive(engine=engine, before=_soon())  # whatever earlier tests left
    _finished(engine, pad=pad)
    archive.archive(engine=engine, before=_soon())
    live = _finished(engine, pad=pad)
    with engine.connect() as conn:
        packed = conn.execute(sa.select(sa.func.count()).where(CONTENT_BLOBS.c.body.is_(None))).scalar_one()
    assert packed > 0
    # when its result is read back, alone and in a batch
    history_id = f"{live}:history"
    alone = repo.get_tool_result(engine=engine, tool_call_id=history_id)
    batch = repo.get_tool_results(engine=engine, tool_call_ids=[history_id, f"{live}:quote"])
    # then it is whole: the packed pieces unpacked, the others as stored
    assert alone == _history(pad) == batch[history_id]
    assert batch[f"{live}:quote"] == _quote(live)


def test_an_archived_record_is_final_and_late_rows_read_with_it(engine: Engine) -> None:
    analysis_id = _finished(engine)
    archive.archive(engine=engine, before=_soon())
    before = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    # a redelivered finish writes no state over the archived row
    assert not ledger.end(
        engine=engine, analysis_id=analysis_id, state={"analysis_id": analysis_id, "status": "done"},
        status="done", iteration=0, report="# other", report_json=None, signal=None, confidence=None,
        error=None,
    )  # fmt: skip
    assert repo.get_analysis(engine=engine, analysis_id=analysis_id) == before
    # a tool-call row flushed late for it reads with the archived ones, in time order
    late = {"tool_call_id": f"{analysis_id}:late", "analysis_id": analysis_id, "stage": "review",
            "iteration": 0, "tool": "calculator", "status": "success", "attempt": 1, "latency_ms": 0.1,
            "result": {"value": 2}}  # fmt: skip
    assert repo.insert_tool_calls(engine=engine, rows=[late]) == 1
    calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert [c["tool_call_id"].split(":")[1] for c in calls] == ["quote", "quote", "history", "late"]
    assert repo.get_tool_result(engine=engine, tool_call_id=f"{analysis_id}:late") == {"value": 2}


def test_a_record_of_another_format_is_refused() -> None:
    raw = json_dumps({"format": 99, "state": {}}).encode()
    with pytest.raises(ValueError, match="format 99"):
        archive.decode(raw)


def test_a_dictionary_is_trained_once_enough_records_are_archived_however_small_the_runs(
    engine: Engine,
) -> None:
    # runs of a few analyses each (a quiet deployment's hourly beat): none trains alone
    for _ in range(3):
        for i in range(archive.MIN_TRAIN_SAMPLES // 3):
            _finished(engine, pad=f"{i:02d}")
        assert archive.archive(engine=engine, before=_soon()).dictionary is None
    for i in range(archive.MIN_TRAIN_SAMPLES // 3 + 1):
        _finished(engine, pad=f"{i:02d}")
    run = archive.archive(engine=engine, before=_soon())
    assert run.trained and run.dictionary is not None


def test_archives_read_the_same_from_many_threads_at_once(engine: Engine) -> None:
    # the gateway serves reads from a thread pool: zstd contexts are per thread
    ids = [_finished(engine, pad=f"{i:02d}") for i in range(4)]
    expected = {i: _reads(engine, i) for i in ids}
    archive.archive(engine=engine, before=_soon())

    def read_all(_: int) -> list[bool]:
        return [_reads(engine, i) == expected[i] for _round in range(10) for i in ids]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [ok for batch in pool.map(read_all, range(8)) for ok in batch]
    assert len(results) == 8 * 10 * len(ids) and all(results)


def _forget_dictionaries() -> None:
    """This process's caches of dictionaries and codecs emptied (another process reads the
    rows afresh)."""
    import threading

    archive._DICTIONARIES.clear()
    archive._CODECS = threading.local()


def test_a_missing_or_corrupt_dictionary_is_named_and_verify_reads_every_frame(engine: Engine) -> None:
    ids = [_finished(engine, pad=f"{i:02d}") for i in range(archive.MIN_TRAIN_SAMPLES)]
    done = archive.archive(engine=engine, before=_soon())
    dictionary = done.dictionary
    assert dictionary is not None and done.analyses == len(ids)
    checked = archive.verify(engine=engine)
    assert (checked.archives, checked.bad) == (len(ids), []) and checked.pieces >= 1
    with engine.begin() as conn:
        good = conn.execute(
            sa.select(archive.DICTIONARIES.c.body).where(archive.DICTIONARIES.c.id == dictionary)
        ).scalar_one()
        # when the dictionary's bytes are damaged
        conn.execute(
            sa.update(archive.DICTIONARIES)
            .where(archive.DICTIONARIES.c.id == dictionary)
            .values(body=bytes(good)[:64] + b"\x00" * 200)
        )
    _forget_dictionaries()
    # then a read names the dictionary (not a zstd error from deep inside)
    with pytest.raises(archive.ArchiveUnreadable, match=f"compression dictionary {dictionary}") as caught:
        repo.get_analysis(engine=engine, analysis_id=ids[0])
    assert caught.value.dictionary_id == dictionary and caught.value.analysis_id == ids[0]
    # and the verification lists every archive that uses it
    _forget_dictionaries()
    checked = archive.verify(engine=engine)
    assert sorted(w for w, _, _ in checked.bad) == sorted(f"analysis {i}" for i in ids)
    assert {d for _, d, _ in checked.bad} == {dictionary}
    # when it is gone altogether (a partial restore: the foreign key cannot stop what bypasses it)
    if engine.dialect.name == "sqlite":  # sqlite3 checks no foreign key unless told to
        import sqlite3

        with sqlite3.connect(str(engine.url.database)) as raw:
            raw.execute("DELETE FROM compression_dictionaries WHERE id = ?", (dictionary,))
    else:
        with engine.begin() as conn:
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            conn.execute(sa.delete(archive.DICTIONARIES).where(archive.DICTIONARIES.c.id == dictionary))
    _forget_dictionaries()
    with pytest.raises(archive.ArchiveUnreadable, match=f"compression dictionary {dictionary} is missing"):
        repo.get_tool_calls(engine=engine, analysis_id=ids[1])
    # a restored dictionary reads again
    with engine.begin() as conn:
        conn.execute(
            sa.insert(archive.DICTIONARIES).values(
                id=dictionary, body=good, samples=len(ids), created_at=datetime.now(UTC)
            )
        )
    _forget_dictionaries()
    assert archive.verify(engine=engine).bad == []
    _forget_dictionaries()
