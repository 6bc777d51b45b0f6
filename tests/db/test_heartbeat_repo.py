"""Service heartbeats (``db.heartbeat_repo``) on SQLite and PostgreSQL: one row per process,
updated in place, the newest of a kind found, rows of long-dead processes pruned."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select

from db import heartbeat_repo
from db._sql import fetch_all, utc_now


def test_a_process_beats_in_one_row_and_the_newest_process_of_a_kind_is_found(engine: Engine) -> None:
    kind = f"sweeper-{uuid.uuid4().hex[:8]}"  # the PostgreSQL database is shared by the tests
    start = utc_now() - timedelta(minutes=5)
    assert heartbeat_repo.latest(engine=engine, kind=kind) is None
    name = heartbeat_repo.beat(
        engine=engine, kind=kind, host="h1", pid=7, started_at=start, detail={"n": 1}, now=start
    )
    assert name == f"{kind}@h1:7"
    again = start + timedelta(seconds=60)
    heartbeat_repo.beat(
        engine=engine, kind=kind, host="h1", pid=7, started_at=start, detail={"n": 2}, now=again
    )
    row = heartbeat_repo.latest(engine=engine, kind=kind)
    assert row is not None
    assert (row["name"], row["pid"], row["started_at"], row["beat_at"], row["detail"]) == (
        name,
        7,
        start,
        again,
        {"n": 2},
    )
    # a second process of the kind (a restart): the newest beat wins
    later = again + timedelta(seconds=5)
    heartbeat_repo.beat(engine=engine, kind=kind, host="h2", pid=9, started_at=later, detail={}, now=later)
    row = heartbeat_repo.latest(engine=engine, kind=kind)
    assert row is not None and row["name"] == f"{kind}@h2:9"
    # a week later, the next beat deletes the rows of processes silent since
    much_later = later + heartbeat_repo.KEEP + timedelta(seconds=1)
    heartbeat_repo.beat(
        engine=engine, kind=kind, host="h3", pid=1, started_at=much_later, detail={}, now=much_later
    )
    names = {
        r["name"]
        for r in fetch_all(
            engine, select(heartbeat_repo.HEARTBEATS).where(heartbeat_repo.HEARTBEATS.c.kind == kind)
        )
    }
    assert names == {f"{kind}@h3:1"}


def test_a_heartbeat_needs_a_kind_and_a_host(engine: Engine) -> None:
    with pytest.raises(ValueError, match="kind and a host"):
        heartbeat_repo.beat(engine=engine, kind="", host="h", pid=1, started_at=utc_now(), detail={})


def test_every_row_of_a_kind_newest_first_and_a_clean_stop_removes_its_row(engine: Engine) -> None:
    kind = f"worker-{uuid.uuid4().hex[:8]}"
    start = utc_now() - timedelta(minutes=1)
    first = heartbeat_repo.beat(
        engine=engine, kind=kind, host="h", pid=1, started_at=start, detail={}, now=start
    )
    second = heartbeat_repo.beat(
        engine=engine, kind=kind, host="h", pid=2, started_at=start, detail={"tasks": ["t"]},
        now=start + timedelta(seconds=5),
    )  # fmt: skip
    assert [r["name"] for r in heartbeat_repo.of_kind(engine=engine, kind=kind)] == [second, first]
    assert heartbeat_repo.remove(engine=engine, name=first) is True
    assert heartbeat_repo.remove(engine=engine, name=first) is False
    assert [r["name"] for r in heartbeat_repo.of_kind(engine=engine, kind=kind)] == [second]
