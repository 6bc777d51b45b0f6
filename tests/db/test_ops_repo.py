"""Operations repository on PostgreSQL and SQLite: exactly-once run and idempotency claims."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from db import ledger, ops_repo, repo


def _watchlist(engine: Engine) -> dict:
    return ops_repo.create_watchlist(
        engine=engine,
        watchlist_id=str(uuid.uuid4()),
        name=f"wl-{uuid.uuid4().hex[:6]}",
        tickers=["AAPL", "MSFT"],
        schedule="30 21 * * 1-5",
        timezone="America/New_York",
        options={},
    )


def test_concurrent_run_claims_create_one_run(engine: Engine) -> None:
    # given, for each of 5 dates, six claimers of the same run at once; several dates because
    # one round loses the race only now and then (with the primary key as the only arbiter,
    # about one round in 40 raised UniqueViolation on the (watchlist_id, run_date) pair)
    wl = _watchlist(engine)
    dates = [date(2026, 1, day) for day in range(5, 10)]
    won: dict[date, list[bool]] = {d: [] for d in dates}
    errors: list[BaseException] = []

    def claim(run_date: date, barrier: threading.Barrier) -> None:
        barrier.wait(timeout=10)
        try:
            won[run_date].append(
                ops_repo.claim_run(engine=engine, watchlist_id=wl["id"], run_date=run_date, trigger="beat")[1]
            )
        except BaseException as exc:
            errors.append(exc)

    for run_date in dates:
        barrier = threading.Barrier(6)
        threads = [threading.Thread(target=claim, args=(run_date, barrier)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    # then none raised, and exactly one claimer of each date created its run
    assert errors == []
    assert all(sorted(won[d]) == [False] * 5 + [True] for d in dates), won
    assert len(ops_repo.list_runs(engine=engine, watchlist_id=wl["id"])) == len(dates)


def test_run_items_finish_once_and_previous_run(engine: Engine) -> None:
    wl = _watchlist(engine)
    first, _ = ops_repo.claim_run(
        engine=engine, watchlist_id=wl["id"], run_date=date(2026, 1, 5), trigger="beat"
    )
    assert ops_repo.add_run_item(
        engine=engine, run_id=first["id"], symbol="ZZZZ", status="refused", error="no data"
    )
    assert not ops_repo.add_run_item(engine=engine, run_id=first["id"], symbol="ZZZZ", status="refused")
    assert ops_repo.finish_run(
        engine=engine, run_id=first["id"], digest_markdown="# d", digest_html="<p>", digest_json={"a": 1}
    )
    assert not ops_repo.finish_run(
        engine=engine, run_id=first["id"], digest_markdown="# other", digest_html="", digest_json={}
    )
    assert ops_repo.get_run(engine=engine, run_id=first["id"])["digest_markdown"] == "# d"
    second, _ = ops_repo.claim_run(
        engine=engine, watchlist_id=wl["id"], run_date=date(2026, 1, 6), trigger="beat"
    )
    assert (
        ops_repo.previous_done_run(engine=engine, watchlist_id=wl["id"], before=date(2026, 1, 6))["id"]
        == first["id"]
    )
    assert [r["id"] for r in ops_repo.open_runs(engine=engine) if r["watchlist_id"] == wl["id"]] == [
        second["id"]
    ]
    items = ops_repo.run_items(engine=engine, run_id=first["id"])
    assert [(i["symbol"], i["status"], i["analysis_status"]) for i in items] == [("ZZZZ", "refused", None)]
    # deleting the watchlist cascades to its runs and items
    assert ops_repo.delete_watchlist(engine=engine, name=wl["name"])
    assert ops_repo.get_run(engine=engine, run_id=first["id"]) is None


def test_a_run_is_pending_while_an_enqueued_ticker_s_analysis_has_not_finished(engine: Engine) -> None:
    wl = _watchlist(engine)
    run, _ = ops_repo.claim_run(
        engine=engine, watchlist_id=wl["id"], run_date=date(2026, 2, 2), trigger="beat"
    )
    # a refused ticker is never pending
    ops_repo.add_run_item(engine=engine, run_id=run["id"], symbol="ZZZZ", status="refused", error="no data")
    assert not ops_repo.run_has_pending(engine=engine, run_id=run["id"])
    # an enqueued ticker whose analysis row is not visible yet is pending
    analysis_id = str(uuid.uuid4())
    ops_repo.add_run_item(
        engine=engine, run_id=run["id"], symbol="AAPL", status="enqueued", analysis_id=analysis_id
    )
    assert ops_repo.run_has_pending(engine=engine, run_id=run["id"])
    # ... and so is one whose analysis is queued or running
    assert ledger.create(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2026, 1, 30),
        user_query="nightly",
        max_iterations=3,
        state={},
    )
    assert ops_repo.run_has_pending(engine=engine, run_id=run["id"])
    for status, pending in (("failed", False), ("researching", True), ("done", False)):
        with engine.begin() as conn:
            conn.execute(
                sa.update(repo.ANALYSES).where(repo.ANALYSES.c.id == analysis_id).values(status=status)
            )
        assert ops_repo.run_has_pending(engine=engine, run_id=run["id"]) is pending, status
    # another run's unfinished analysis is not this run's business
    other, _ = ops_repo.claim_run(
        engine=engine, watchlist_id=wl["id"], run_date=date(2026, 2, 3), trigger="beat"
    )
    ops_repo.add_run_item(
        engine=engine, run_id=other["id"], symbol="MSFT", status="enqueued", analysis_id="x"
    )
    assert not ops_repo.run_has_pending(engine=engine, run_id=run["id"])
    assert ops_repo.run_has_pending(engine=engine, run_id=other["id"])


def test_idempotency_key_has_one_winner_and_can_be_released(engine: Engine) -> None:
    key = f"k-{uuid.uuid4().hex[:6]}"
    a = ops_repo.claim_idempotency_key(
        engine=engine, api_key_id="kid", key=key, request_hash="h", analysis_id="a1"
    )
    b = ops_repo.claim_idempotency_key(
        engine=engine, api_key_id="kid", key=key, request_hash="h2", analysis_id="a2"
    )
    assert a["analysis_id"] == b["analysis_id"] == "a1" and b["request_hash"] == "h"
    # another API key has its own namespace
    c = ops_repo.claim_idempotency_key(
        engine=engine, api_key_id="other", key=key, request_hash="h", analysis_id="a3"
    )
    assert c["analysis_id"] == "a3"
    ops_repo.release_idempotency_key(engine=engine, api_key_id="kid", key=key, analysis_id="a1")
    d = ops_repo.claim_idempotency_key(
        engine=engine, api_key_id="kid", key=key, request_hash="h", analysis_id="a4"
    )
    assert d["analysis_id"] == "a4"


def test_idempotency_key_expires_after_its_ttl(engine: Engine) -> None:
    from datetime import UTC, datetime, timedelta

    key = f"k-{uuid.uuid4().hex[:6]}"
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    claim = ops_repo.claim_idempotency_key
    a = claim(
        engine=engine, api_key_id="ttl", key=key, request_hash="h", analysis_id="a1", ttl_s=3600, now=t0
    )
    # within the TTL the key still names a1, even for a different body (the caller answers 409)
    b = claim(
        engine=engine,
        api_key_id="ttl",
        key=key,
        request_hash="h2",
        analysis_id="a2",
        ttl_s=3600,
        now=t0 + timedelta(seconds=3599),
    )
    assert a["analysis_id"] == b["analysis_id"] == "a1"
    # past it the key is free again and binds the new analysis
    c = claim(
        engine=engine,
        api_key_id="ttl",
        key=key,
        request_hash="h2",
        analysis_id="a3",
        ttl_s=3600,
        now=t0 + timedelta(seconds=3601),
    )
    assert c["analysis_id"] == "a3" and c["request_hash"] == "h2"
    # another API key's old claims are not this caller's to purge
    other = claim(engine=engine, api_key_id="ttl-other", key=key, request_hash="h", analysis_id="o1", now=t0)
    claim(
        engine=engine,
        api_key_id="ttl",
        key="fresh",
        request_hash="h",
        analysis_id="a4",
        ttl_s=3600,
        now=t0 + timedelta(days=2),
    )
    again = claim(engine=engine, api_key_id="ttl-other", key=key, request_hash="h", analysis_id="o2")
    assert other["analysis_id"] == again["analysis_id"] == "o1"


def test_api_keys_names_are_unique_and_revocable(engine: Engine) -> None:
    name = f"key-{uuid.uuid4().hex[:6]}"
    ops_repo.create_api_key(engine=engine, key_id=uuid.uuid4().hex[:12], name=name, key_hash="0" * 64)
    with pytest.raises(ops_repo.DuplicateNameError):
        ops_repo.create_api_key(engine=engine, key_id=uuid.uuid4().hex[:12], name=name, key_hash="1" * 64)
    assert ops_repo.revoke_api_key(engine=engine, name=name)
    assert not ops_repo.revoke_api_key(engine=engine, name=name)
    listed = [k for k in ops_repo.list_api_keys(engine=engine) if k["name"] == name]
    assert len(listed) == 1 and listed[0]["revoked_at"] is not None and "key_hash" not in listed[0]


def test_concurrent_anonymous_requests_are_counted_in_one_row(engine: Engine) -> None:
    from concurrent.futures import ThreadPoolExecutor

    first = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    address = f"203.0.113.7-{uuid.uuid4().hex[:8]}"  # this test's rows (the PostgreSQL database is shared)

    def count(i: int) -> None:
        ops_repo.count_audit(
            engine=engine,
            aggregate_key=f"anonymous|{address}|401|1700000000",
            audit_id=str(uuid.uuid4()),
            request_id=f"req-{i}",
            method="DELETE",
            what="DELETE /watchlists/{name}",
            status_code=401,
            client_address=address,
            at=first + timedelta(seconds=i),
        )

    count(0)  # the window's first request writes the row
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(count, range(1, 25)))
    # another window (or status) of the same address is another row
    ops_repo.count_audit(
        engine=engine,
        aggregate_key=f"anonymous|{address}|401|1700000060",
        audit_id=str(uuid.uuid4()),
        request_id="req-next",
        method="POST",
        what="POST /analyze",
        status_code=401,
        client_address=address,
        at=first + timedelta(minutes=2),
    )
    rows = sorted(
        (r for r in ops_repo.list_audit(engine=engine, limit=1000) if r["client_address"] == address),
        key=lambda r: r["at"],
    )
    assert [(r["requests"], r["request_id"], r["what"]) for r in rows] == [
        (25, "req-0", "DELETE /watchlists/{name}"),
        (1, "req-next", "POST /analyze"),
    ]
    assert rows[0]["at"] == first and first < rows[0]["last_at"] <= first + timedelta(seconds=24)
    assert rows[0]["tenant"] is None and rows[0]["api_key_id"] is None
    assert rows[0]["outcome"] == "refused" and rows[0]["client_address"] == address
