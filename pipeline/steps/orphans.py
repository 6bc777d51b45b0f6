"""A dead worker's analyses, re-driven in seconds: :func:`redrive_orphaned` (the recovery
sweeper runs it when ``apps.sweeper.DeadWorkers`` finds a worker dead).

On a Redis broker a message a worker has received stays in kombu's ``unacked`` hash until the
worker acknowledges it (with ``acks_late``, after its step). When the worker's main process dies
(``kill -9``, an out-of-memory kill, a host lost) nothing acknowledges or returns those messages
but the visibility timeout (7 minutes by default), and the recovery sweep would re-drive their
analyses only after the lease (5 minutes) plus a sweep. The workers' heartbeats
(``tasks.worker_heartbeat``: every few seconds, the task ids each holds) tell the dead
worker's deliveries from the live ones' at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.settings import Settings
from core.stages import TERMINAL_STATUSES, step_after
from core.state import FinancialAgentState
from db import heartbeat_repo, ledger, progress_repo
from db._sql import utc_now
from db.engine import get_engine
from pipeline.steps.close import fail_analysis
from pipeline.steps.inventory import Deliveries
from pipeline.steps.recovery import Action, Recovery, _redrive, queues_of

logger = logging.getLogger("finagent.recovery")


@dataclass(frozen=True)
class WorkerBeat:
    """A worker's latest heartbeat (``tasks.worker_heartbeat``): its row ``name``, its Celery
    ``hostname``, when it beat (UTC) and the task ids it held then."""

    name: str
    hostname: str
    beat_at: datetime
    tasks: frozenset[str]


def worker_beats(*, settings: Settings) -> list[WorkerBeat]:
    """Every worker heartbeat in the database, newest first."""
    rows = heartbeat_repo.of_kind(
        engine=get_engine(settings.service.effective_database_url), kind=heartbeat_repo.WORKER_KIND
    )
    return [
        WorkerBeat(
            name=row["name"],
            hostname=str((row["detail"] or {}).get("hostname") or ""),
            beat_at=row["beat_at"],
            tasks=frozenset((row["detail"] or {}).get("tasks") or ()),
        )
        for row in rows
    ]


@dataclass(frozen=True)
class OrphanSweep:
    """What :func:`redrive_orphaned` did: the ``recoveries`` (one per analysis re-driven or
    failed), how many orphaned deliveries it left because their analysis moved meanwhile
    (``remaining``: the sweeper looks again), and whether it could judge at all (``judged``:
    ``False`` when a live worker did not beat in time)."""

    recoveries: list[Recovery]
    remaining: int
    judged: bool


def redrive_orphaned(
    *,
    settings: Settings,
    deliveries: Callable[[set[str]], Deliveries | None] | None = None,
    beats: Callable[[], list[WorkerBeat]] | None = None,
    drop: Callable[[list[str]], int] | None = None,
    publish: Callable[[FinancialAgentState, str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = utc_now,
    dry_run: bool = False,
    limit: int = 5000,
) -> OrphanSweep:
    """Re-drive (or, past ``max_recoveries``, fail ``STALLED``) every analysis whose only
    messages are deliveries no live worker holds, whatever its lease.

    A delivery (an entry of kombu's ``unacked`` hash) is an ORPHAN when it is unacknowledged at
    a first reading ``t0`` and still at a second one, and no live worker (heartbeat younger
    than ``worker_dead_seconds``) listed its task in a heartbeat taken after ``t0``. A worker
    lists every task it holds (received and not finished) in each heartbeat and writes the
    ``unacked`` entry the moment it receives the message, so a live worker's delivery is never
    an orphan.

    An analysis with an orphan is re-driven when no message waits for it in a queue, no other
    delivery for it exists, no live worker holds its lease's task, and its row did not move
    between the readings; the take is guarded by the row as read (``db.ledger.take``):
    a worker that completes the step meanwhile wins, and a worker that was only slow fails its
    checkpoint's fence and writes nothing, so one copy of the state is kept. The orphans of a
    re-driven or finished analysis are removed from the broker (as an ack would).

    Args:
        deliveries: ``{queues} -> Deliveries`` (default ``inventory.broker_deliveries``;
            ``None`` on a broker without an inventory: nothing to do).
        beats: the workers' heartbeats (default :func:`worker_beats`).
        drop: removes delivery tags from the broker (default ``inventory.drop_broker_unacked``).
        publish: as for ``recovery.sweep``. sleep / now: waiting and the clock (tests).
        dry_run: say what would be done, change nothing.

    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable, the transport's
    connection errors when the broker is (a re-drive already taken is given back).
    """
    from pipeline.steps.inventory import broker_deliveries, drop_broker_unacked

    engine = get_engine(settings.service.effective_database_url)
    read = deliveries or broker_deliveries
    read_beats = beats or (lambda: worker_beats(settings=settings))
    remove = drop or drop_broker_unacked
    dead_after = timedelta(seconds=settings.durability.worker_dead_seconds)
    rows = {row["id"]: row for row in progress_repo.unfinished(engine=engine, limit=limit)}
    queues = {q for row in rows.values() for q in queues_of(step_after(row["checkpoint"]))}
    t0 = now()
    first = read(queues)
    if first is None or not first.unacked:
        return OrphanSweep([], 0, True)
    # every live worker must beat after t0 (listing what it holds then): wait up to two beats
    deadline = t0 + timedelta(seconds=2 * settings.durability.worker_heartbeat_seconds + 2)
    while True:
        found = read_beats()
        moment = now()
        live = [b for b in found if moment - b.beat_at < dead_after]
        if all(b.beat_at > t0 for b in live):
            break
        if moment > deadline:
            late = [b.name for b in live if b.beat_at <= t0]
            logger.info("orphan sweep: no heartbeat from %s since the first look; looking again later", late)
            return OrphanSweep([], len(first.unacked), False)
        sleep(0.5)
    second = read(queues)
    if second is None:
        return OrphanSweep([], 0, True)
    held: frozenset[str] = frozenset().union(*(b.tasks for b in live))
    orphans = {tag: ids for tag, ids in second.unacked.items() if tag in first.unacked and ids[0] not in held}
    by_analysis: dict[str | None, list[str]] = {}
    for tag, (_, analysis_id) in orphans.items():
        by_analysis.setdefault(analysis_id, []).append(tag)
    now_rows = progress_repo.progress_rows(engine=engine, analysis_ids=[a for a in by_analysis if a])
    done: list[Recovery] = []
    remaining = 0
    for analysis_id, tags in by_analysis.items():
        row = now_rows.get(analysis_id) if analysis_id is not None else None
        if row is None or row["status"] in TERMINAL_STATUSES:
            if not dry_run:  # a finished (or unknown) analysis's late copy: nothing to re-drive
                remove(tags)
            continue
        seen = rows.get(str(analysis_id))
        if seen is None or any(row[name] != seen[name] for name in ledger.UNMOVED_COLUMNS):
            remaining += len(tags)  # it moved meanwhile: judged again at the next look
            continue
        others = [t for t, ids in second.unacked.items() if ids[1] == analysis_id and t not in orphans]
        if (
            analysis_id in second.queued_analyses
            or others
            or (row["lease_owner"] is not None and row["lease_owner"] in held)
        ):
            continue  # a live copy exists: the orphan is a duplicate, left to its timeout
        done.extend(_redrive_one(settings, engine, row, tags, remove, publish, dry_run))
    return OrphanSweep(done, remaining, True)


def _redrive_one(
    settings: Settings,
    engine: Any,
    row: Mapping[str, Any],
    tags: list[str],
    remove: Callable[[list[str]], int],
    publish: Callable[[FinancialAgentState, str], None] | None,
    dry_run: bool,
) -> list[Recovery]:
    """Re-drive (or fail) the orphaned analysis ``row``; remove its orphans ``tags``."""
    analysis_id = str(row["id"])
    step = step_after(row["checkpoint"])
    recoveries = int(row["recoveries"])
    found: dict[str, Any] = dict(
        analysis_id=analysis_id,
        symbol=str(row["symbol"]),
        status=str(row["status"]),
        step=step,
        stalled_since=row["lease_expires_at"],
    )
    lost = f"its worker stopped heartbeating while holding {step}"
    if recoveries >= settings.durability.max_recoveries:
        detail = f"STALLED after {recoveries} recoveries: {lost}"
        if not dry_run:
            fail_analysis(
                analysis_id=analysis_id, stage=step, code="STALLED", message=detail, settings=settings
            )
            remove(tags)
        logger.warning("analysis %s: %s", analysis_id, detail)
        return [Recovery(**found, recoveries=recoveries, action=Action.FAIL, detail=detail)]
    detail = (
        f"{lost}; re-driven from {step} (recovery {recoveries + 1} of {settings.durability.max_recoveries})"
    )
    if dry_run:
        return [Recovery(**found, recoveries=recoveries + 1, action=Action.REDRIVE, detail=detail)]
    taken = ledger.take(
        engine=engine, seen=row, lease_seconds=settings.durability.lease_seconds, expired=False
    )
    if taken is None:  # a worker or another sweeper moved it meanwhile
        return []
    _redrive(engine, taken, publish)
    remove(tags)
    logger.warning("analysis %s: %s", analysis_id, detail)
    return [Recovery(**found, recoveries=taken["recoveries"], action=Action.REDRIVE, detail=detail)]
