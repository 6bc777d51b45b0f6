"""``finagent purge`` in service mode: analyses run by a real worker on Redis and PostgreSQL,
two of them made old, purged, and the kept one still replays byte-identical from its rows and
the tool-result pieces it shares with the purged ones."""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from db import repo
from db.attempt_rows import CONTENT_BLOBS
from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.test_replay import NO_SERVICES


def _stop(proc: Any) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def test_purge_then_a_kept_analysis_replays_byte_identical(service: Service, start_worker) -> None:
    # given three analyses: AAPL a week apart (their history windows share most months) and MSFT
    worker = start_worker()
    old = service.analyze_json("AAPL", "--as-of", "2012-06-22")
    kept = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    other = service.analyze_json("MSFT", "--as-of", "2010-06-30")
    _stop(worker)
    engine = get_engine(service.env["FINAGENT_DATABASE_URL"])
    kept_refs = {
        h
        for r in repo.get_tool_calls(engine=engine, analysis_id=kept["analysis_id"])
        for h in r["result_refs"] or ()
    }
    old_refs = {
        h
        for r in repo.get_tool_calls(engine=engine, analysis_id=old["analysis_id"])
        for h in r["result_refs"] or ()
    }
    assert kept_refs & old_refs, "a week apart, the two AAPL windows share pieces"
    # the first AAPL and the MSFT analyses were created in 2020
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id.in_([old["analysis_id"], other["analysis_id"]]))
            .values(created_at=datetime(2020, 1, 1, tzinfo=UTC))
        )

    # when a dry run, then the purge, delete what was created before 2021
    dry = json.loads(service.cli("purge", "--before", "2021-01-01", "--dry-run", "--json").stdout)
    assert dry["analyses"] == 2 and dry["dry_run"] is True
    assert repo.get_analysis(engine=engine, analysis_id=old["analysis_id"]) is not None
    done = json.loads(service.cli("purge", "--before", "2021-01-01", "--json").stdout)

    # then both are gone with their rows, the shared pieces are kept, the others deleted
    assert done["analyses"] == 2 and done["tool_calls"] == dry["tool_calls"] > 0
    assert done["content_blobs"] == dry["content_blobs"] > 0
    for gone in (old, other):
        assert repo.get_analysis(engine=engine, analysis_id=gone["analysis_id"]) is None
        assert repo.get_tool_calls(engine=engine, analysis_id=gone["analysis_id"]) == []
    with engine.connect() as conn:
        left = set(conn.execute(sa.select(CONTENT_BLOBS.c.hash)).scalars())
    assert kept_refs <= left and not (old_refs - kept_refs) & left
    # and the kept analysis replays byte-identical with nothing running but PostgreSQL
    proc = service.cli("replay", kept["analysis_id"], extra_env=NO_SERVICES)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("identical sha256=")


def test_purge_refuses_a_bad_date(service: Service) -> None:
    proc = service.cli("purge", "--before", "2021-13-01")
    assert proc.returncode == 2 and "not a date" in proc.stderr
