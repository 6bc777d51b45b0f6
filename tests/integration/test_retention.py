"""``finagent purge`` and ``finagent archive`` in service mode: analyses run by a real worker on
Redis and PostgreSQL, two of them made old, purged, and the kept one still replays
byte-identical from its rows (or its archive) and the tool-result pieces it shares with the
purged ones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from db import blobs, repo
from db.attempt_rows import CONTENT_BLOBS, TOOL_CALLS
from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.test_replay import NO_SERVICES


def _pieces(engine: Engine, analysis: dict[str, Any]) -> set[str]:
    """The content-blob hashes the analysis's tool results use."""
    return blobs.all_refs(repo.get_tool_calls(engine=engine, analysis_id=analysis["analysis_id"]))


def _created_in_2020(engine: Engine, *analyses: dict[str, Any]) -> None:
    """Date the analyses' creation back to 2020-01-01 (before a purge's day)."""
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id.in_([a["analysis_id"] for a in analyses]))
            .values(created_at=datetime(2020, 1, 1, tzinfo=UTC))
        )


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
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    kept_refs, old_refs = (_pieces(engine, a) for a in (kept, old))
    assert kept_refs & old_refs, "a week apart, the two AAPL windows share pieces"
    _created_in_2020(engine, old, other)  # the first AAPL and the MSFT analyses

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


def test_archive_keeps_show_and_replay_identical_and_purge_keeps_its_pieces(
    service: Service, start_worker
) -> None:
    # given three analyses run by a real worker (two AAPL a week apart share history pieces)
    worker = start_worker()
    old = service.analyze_json("AAPL", "--as-of", "2012-06-22")
    kept = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    other = service.analyze_json("MSFT", "--as-of", "2010-06-30")
    _stop(worker)
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    shown = {
        a["analysis_id"]: service.cli("show", a["analysis_id"], "--json").stdout for a in (old, kept, other)
    }
    kept_refs, old_refs = (_pieces(engine, a) for a in (kept, old))
    _created_in_2020(engine, old, other)  # the first AAPL and the MSFT analyses

    # when every finished analysis is archived (a dry run first)
    dry = json.loads(service.cli("archive", "--older-than", "0s", "--dry-run", "--json").stdout)
    assert dry["analyses"] >= 3 and dry["dry_run"] is True
    done = json.loads(service.cli("archive", "--older-than", "0s", "--json").stdout)

    # then their tool-call rows are gone from the table, `finagent show` prints the same, and
    # the kept analysis replays byte-identical with nothing running but PostgreSQL
    assert done["analyses"] == dry["analyses"] and 0 < done["stored_bytes"] < done["raw_bytes"]
    with engine.connect() as conn:
        left = conn.execute(
            sa.select(sa.func.count())
            .select_from(TOOL_CALLS)
            .where(TOOL_CALLS.c.analysis_id.in_(list(shown)))
        ).scalar_one()
    assert left == 0
    for analysis_id, text in shown.items():
        assert service.cli("show", analysis_id, "--json").stdout == text
    proc = service.cli("replay", kept["analysis_id"], extra_env=NO_SERVICES)
    assert proc.returncode == 0 and proc.stdout.startswith("identical sha256="), proc.stdout[-3000:]

    # and a purge of the other two keeps the pieces the kept archive uses, deletes the others
    purged = json.loads(service.cli("purge", "--before", "2021-01-01", "--json").stdout)
    assert purged["analyses"] == 2 and purged["analysis_archives"] == 2
    with engine.connect() as conn:
        pieces = set(conn.execute(sa.select(CONTENT_BLOBS.c.hash)).scalars())
    assert kept_refs <= pieces and not (old_refs - kept_refs) & pieces
    proc = service.cli("replay", kept["analysis_id"], extra_env=NO_SERVICES)
    assert proc.returncode == 0 and proc.stdout.startswith("identical sha256="), proc.stdout[-3000:]


def test_archive_refuses_a_bad_duration(service: Service) -> None:
    proc = service.cli("archive", "--older-than", "soon")
    assert proc.returncode == 2 and "duration 'soon'" in proc.stderr


def test_the_archive_beat_task_archives_on_the_worker(service: Service, start_worker) -> None:
    # given a worker that archives what finished more than a second ago, and one analysis
    start_worker(FINAGENT_DURABILITY_ARCHIVE_AFTER_SECONDS="1")
    done = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    shown = service.cli("show", done["analysis_id"], "--json").stdout
    time.sleep(1.5)

    # when beat's task runs on the worker
    code = (
        "from tasks.app import app; import json; "
        "print(json.dumps(app.send_task('finagent.archive.run').get(timeout=120)))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env=service.env, capture_output=True, text=True, timeout=180, check=True
    )
    report = json.loads(run.stdout.strip().splitlines()[-1])

    # then the analysis is archived and reads the same
    assert report["analyses"] >= 1 and report["dry_run"] is False
    row = repo.get_analysis(
        engine=get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]), analysis_id=done["analysis_id"]
    )
    assert row is not None and row["archived_at"] is not None
    assert service.cli("show", done["analysis_id"], "--json").stdout == shown
    # and its chart still draws from the archived bars (the render is logged as a late row)
    chart = service.cli("chart", done["analysis_id"])
    assert chart.returncode == 0 and chart.stdout.strip().endswith(".png"), chart.stderr[-2000:]
