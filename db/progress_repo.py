"""Where an analysis is, said by its row: step claims, checkpoints, leases and recovery.

The broker is only a delivery mechanism: a message can be lost (Redis without persistence
restarting), duplicated (a redelivery, a re-drive) or late
(docs/design.md, "Durability and idempotency"). The ``analyses`` row is the record of truth (migration 0006):

* ``checkpoint``: the last completed stage of the current pass (``NULL`` before the first); the
  stored ``state`` is the state after it, so the next step can be re-driven from the row.
* ``attempt``, ``lease_owner``, ``lease_expires_at``: a worker CLAIMS a step before running it
  (:func:`claim_step`: one guarded ``UPDATE``, so of two copies of a message at most one runs at
  a time), and COMPLETES it (:func:`complete_step`: the new state, checkpoint and the step's
  rows in one transaction, fenced by the lease, so a worker that lost its lease writes no state).
* ``recoveries``: re-drives by the sweep (:func:`take_for_recovery`), capped by the caller.

Every function is one transaction (a claim: one autocommitted statement on PostgreSQL,
``db.engine.single_statement``) and safe to race: the guard of each ``UPDATE`` is the claim
(``WHERE`` on the row's own columns; PostgreSQL's row lock serialises concurrent updaters and
re-evaluates the ``WHERE`` on the new row version under READ COMMITTED, SQLite writers are
serialised by ``BEGIN IMMEDIATE``, ``db.engine.begin_write``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from core import stages
from db import state_refs
from db._sql import fetch_all, utc_now
from db.attempt_rows import (
    CONTENT_BLOBS,
    LLM_CALLS,
    TOOL_CALLS,
    dedupe,
    insert_rows,
    llm_call_values,
    rows_cte,
    take_blobs,
    tool_call_values,
)
from db.engine import begin_write, reading, single_statement
from db.redact import redact
from db.repo import ANALYSES, TERMINAL_STATUSES, check_status, pack_state, state_for_row, unpack_state


class ClaimOutcome(StrEnum):
    """What :func:`claim_step` found.

    * ``claimed``: this owner holds the step's lease now and must run it.
    * ``busy``: another owner holds a live lease on the same step (a duplicate message): drop it.
    * ``stale``: the row moved past this step (a late copy), or the analysis is finished or gone.
    """

    CLAIMED = "claimed"
    BUSY = "busy"
    STALE = "stale"


@dataclass(frozen=True)
class StepClaim:
    """The result of :func:`claim_step`: the outcome, the attempt number of the step (counting
    this claim when claimed; 0 when not), and the row's status and checkpoint as found."""

    outcome: ClaimOutcome
    attempt: int
    status: str | None
    checkpoint: str | None


def _lease_until(now: datetime, seconds: float) -> datetime:
    return now + timedelta(seconds=seconds)


_B = sa.bindparam

#: The columns a step's claim and its fence compare (``p_*`` parameters: SQLAlchemy reserves a
#: column's own name for the SET clause).
_UNFINISHED_IN_PASS = (
    ANALYSES.c.id == _B("p_id"),
    ANALYSES.c.iteration == _B("p_iteration"),
    # one comparison per terminal status rather than NOT IN: SQLAlchemy renders an IN list
    # ("POSTCOMPILE") into the SQL text on every execution, ~0.05 ms of client CPU per statement
    *(ANALYSES.c.status != terminal for terminal in sorted(TERMINAL_STATUSES)),
    ANALYSES.c.checkpoint.is_not_distinct_from(_B("p_before", type_=ANALYSES.c.checkpoint.type)),
)

#: Nobody else holds a live lease: no owner, this owner, or an expired lease (the claim's test).
_FREE_FOR_OWNER = sa.or_(
    ANALYSES.c.lease_owner.is_(None),
    ANALYSES.c.lease_owner == _B("p_owner"),
    ANALYSES.c.lease_expires_at < _B("p_now", type_=ANALYSES.c.lease_expires_at.type),
)

# The statements of the hot path are built once per process, not per call: building the
# expression (coercions, operators, the VALUES clause) cost as much client CPU as the round
# trips (0.9 → 0.5 ms per claim, measured on PostgreSQL; SQLAlchemy's compiled cache then
# serves the SQL text).
_CLAIM = (
    sa.update(ANALYSES)
    .where(
        *_UNFINISHED_IN_PASS,
        _FREE_FOR_OWNER,
    )
    .values(
        status=_B("p_status"),
        attempt=ANALYSES.c.attempt + 1,
        lease_owner=_B("p_owner"),
        lease_expires_at=_B("p_until", type_=ANALYSES.c.lease_expires_at.type),
        updated_at=_B("p_now", type_=ANALYSES.c.updated_at.type),
    )
    .returning(ANALYSES.c.attempt)
)

#: The fence of a completion: the row still in the step's pass and checkpoint, leased by its
#: owner (``True``: the step was claimed) or, for a step run without a claim (a first delivery
#: of a stage without side effects, ``pipeline.steps.claim.runs_unclaimed``), leased by nobody else.
_FENCED = {
    True: sa.update(ANALYSES).where(*_UNFINISHED_IN_PASS, ANALYSES.c.lease_owner == _B("p_owner")),
    False: sa.update(ANALYSES).where(*_UNFINISHED_IN_PASS, _FREE_FOR_OWNER),
}

_COMPLETE = {
    claimed: fenced.values(
        state=_B("p_state", type_=ANALYSES.c.state.type),
        status=_B("p_status"),
        checkpoint=_B("p_checkpoint"),
        attempt=0,
        lease_owner=None,
        lease_expires_at=_B("p_until", type_=ANALYSES.c.lease_expires_at.type),
        updated_at=_B("p_now", type_=ANALYSES.c.updated_at.type),
    )
    for claimed, fenced in _FENCED.items()
}


def _fence(*, analysis_id: str, iteration: int, step: str, owner: str) -> dict[str, Any]:
    """The parameters of :data:`_FENCED` for ``owner`` completing ``step``."""
    return {
        "p_id": analysis_id,
        "p_iteration": iteration,
        "p_before": stages.step_before(step),
        "p_owner": owner,
    }


@functools.cache
def _finish_statement(present: tuple[str, ...], claimed: bool) -> sa.Update:
    """:data:`_FENCED` (``claimed``) finishing the row, setting the optional columns ``present``
    (of report, report_json, signal, confidence, error) from ``p_<name>`` parameters; the
    others keep their values. At most 64 variants, each built once."""
    optional = {name: _B(f"p_{name}", type_=ANALYSES.c[name].type) for name in present}
    return _FENCED[claimed].values(
        state=_B("p_state", type_=ANALYSES.c.state.type),
        status=_B("p_status"),
        checkpoint=None,
        attempt=0,
        lease_owner=None,
        lease_expires_at=None,
        updated_at=_B("p_now", type_=ANALYSES.c.updated_at.type),
        finished_at=sa.func.coalesce(ANALYSES.c.finished_at, _B("p_now", type_=ANALYSES.c.finished_at.type)),
        **optional,
    )


def claim_step(
    *,
    engine: Engine,
    analysis_id: str,
    iteration: int,
    step: str,
    owner: str,
    lease_seconds: float,
) -> StepClaim:
    """Claim stage ``step`` of pass ``iteration`` for ``owner`` (a Celery task id).

    The claim succeeds iff the row is unfinished, in pass ``iteration``, its checkpoint is the
    stage before ``step`` (``core.stages.step_before``), and nobody else holds a live
    lease (no owner, the same owner — a Celery retry or a redelivery keeps its task id — or an
    expired lease). Then, in the same ``UPDATE``: ``status`` = the stage's status, ``attempt`` + 1,
    ``lease_owner`` = ``owner``, ``lease_expires_at`` = now + ``lease_seconds``, ``updated_at``
    = now.

    Returns a :class:`StepClaim`. Raises ``KeyError`` for an unknown stage.
    """
    spec = stages.stage(step)
    before = stages.step_before(step)
    now = utc_now()
    with single_statement(engine) as conn:
        claimed = conn.execute(
            _CLAIM,
            {
                "p_id": analysis_id,
                "p_iteration": iteration,
                "p_before": before,
                "p_owner": owner,
                "p_now": now,
                "p_status": spec.status.value,
                "p_until": _lease_until(now, lease_seconds),
            },
        ).first()
        if claimed is not None:
            return StepClaim(ClaimOutcome.CLAIMED, int(claimed[0]), spec.status.value, before)
        row = conn.execute(
            sa.select(ANALYSES.c.status, ANALYSES.c.iteration, ANALYSES.c.checkpoint).where(
                ANALYSES.c.id == analysis_id
            )
        ).first()
    if row is None:
        return StepClaim(ClaimOutcome.STALE, 0, None, None)
    status, row_iteration, checkpoint = row
    same_step = status not in TERMINAL_STATUSES and row_iteration == iteration and checkpoint == before
    return StepClaim(ClaimOutcome.BUSY if same_step else ClaimOutcome.STALE, 0, status, checkpoint)


@functools.cache
def _one_statement(update: sa.Update, tools: bool, llms: bool, pieces: bool = False) -> sa.Select[Any]:
    """``update`` (a fenced completion) and the inserts of the step's rows (``tools``: the
    ``p_tools`` parameter, ``llms``: ``p_llms``) as ONE PostgreSQL statement of data-modifying
    CTEs, selecting how many analyses rows the update changed. A single statement is atomic
    on its own, so it runs autocommitted: one round trip instead of four (BEGIN, UPDATE, the
    batch insert, COMMIT; a research checkpoint with its four rows: client CPU 1.3 → 0.9-1.1
    ms, server 2.3 → 1.5-1.7 ms, docs/benchmarks.md). The CTEs
    see one snapshot and all run whether or not the update matched (PostgreSQL manual,
    "Data-Modifying Statements in WITH"), which is the rule: the rows are facts either way."""
    done = update.returning(sa.literal_column("1")).cte("done")
    stmt = sa.select(sa.select(sa.func.count()).select_from(done).scalar_subquery())
    if pieces:  # the tool results' pieces (``db.blobs``), parameter ``p_blobs``
        stmt = stmt.add_cte(rows_cte(CONTENT_BLOBS, "blobs"))
    if tools:
        stmt = stmt.add_cte(rows_cte(TOOL_CALLS, "tools"))
    if llms:
        stmt = stmt.add_cte(rows_cte(LLM_CALLS, "llms"))
    return stmt


def _write_step(
    engine: Engine,
    update: sa.Update,
    params: dict[str, Any],
    *,
    tool_values: list[dict[str, Any]],
    llm_values: list[dict[str, Any]],
) -> bool:
    """Run the fenced ``update`` with ``params`` and insert the rows, atomically; ``True`` when
    the update changed the row. PostgreSQL: one autocommitted statement
    (:func:`_one_statement`); SQLite: one ``BEGIN IMMEDIATE`` transaction."""
    if engine.dialect.name == "postgresql":
        pieces = take_blobs(tool_values)
        stmt = _one_statement(update, bool(tool_values), bool(llm_values), bool(pieces))
        rows = {"p_tools": tool_values} if tool_values else {}
        if pieces:
            rows["p_blobs"] = pieces
        if llm_values:
            rows["p_llms"] = llm_values
        with single_statement(engine) as conn:
            changed: int = conn.execute(stmt, {**params, **rows}).scalar_one()
        return changed == 1
    with begin_write(engine) as conn:
        applied = conn.execute(update, params).rowcount == 1
        insert_rows(conn, TOOL_CALLS, tool_values)
        insert_rows(conn, LLM_CALLS, llm_values)
    return applied


def _packed(
    engine: Engine, analysis_id: str, state: dict[str, Any], tool_values: list[dict[str, Any]]
) -> dict[str, Any]:
    """``state`` as the column stores it (``db.repo.pack_state``: the tool results it repeats
    as references). A read before the step's one-statement write: the rows it may reference
    are the analysis's stored calls and ``tool_values``, which that statement inserts."""
    with reading(engine) as conn:
        return pack_state(conn, analysis_id, state, tool_values)


def complete_step(
    *,
    engine: Engine,
    analysis_id: str,
    iteration: int,
    step: str,
    owner: str,
    state: dict[str, Any],
    status: str,
    lease_seconds: float,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    llm_calls: Sequence[Mapping[str, Any]] = (),
    claimed: bool = True,
) -> bool:
    """Record that ``owner`` completed stage ``step`` of pass ``iteration``, in ONE transaction:

    1. the row, only while ``owner`` still holds the step's lease (the fence: a worker whose
       lease expired and was re-driven elsewhere writes no state; ``claimed=False``, a step run
       without a claim: while nobody else holds a live lease, the claim's own test, so the
       claim and the completion are one ``UPDATE``): ``state``, ``status`` (the
       next step's, a running status), ``checkpoint`` = ``step``, ``attempt`` = 0, no owner,
       ``lease_expires_at`` = now + ``lease_seconds`` (the next step must start within it);
    2. the step's ``tool_calls`` and ``llm_calls`` rows (ON CONFLICT (id) DO NOTHING), whether or
       not the fence held: attempts that happened are facts, and their ids are deterministic.

    Returns ``True`` when the row was updated; ``False`` when the lease was lost (the caller
    must not hand the state on). Raises ``ValueError`` for a terminal or unknown ``status`` or a
    malformed row (before any write), ``KeyError`` for an unknown stage.
    """
    stages.stage(step)
    check_status(status)
    if status in TERMINAL_STATUSES:
        raise ValueError(f"complete_step writes a running status, not {status!r} (end_of_pass finishes)")
    tool_values = dedupe(
        tool_call_values(r, analysis_id=analysis_id, iteration=iteration) for r in tool_calls
    )
    llm_values = dedupe(llm_call_values(r, analysis_id=analysis_id) for r in llm_calls)
    now = utc_now()
    params = {
        **_fence(analysis_id=analysis_id, iteration=iteration, step=step, owner=owner),
        "p_state": _packed(engine, analysis_id, state, tool_values),
        "p_status": status,
        "p_checkpoint": step,
        "p_until": _lease_until(now, lease_seconds),
        "p_now": now,
    }
    return _write_step(engine, _COMPLETE[claimed], params, tool_values=tool_values, llm_values=llm_values)


def finish_step(
    *,
    engine: Engine,
    analysis_id: str,
    iteration: int,
    step: str,
    owner: str,
    state: dict[str, Any],
    status: str,
    report: str | None,
    report_json: dict[str, Any] | None,
    signal: str | None,
    confidence: float | None,
    error: str | None,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    llm_calls: Sequence[Mapping[str, Any]] = (),
    claimed: bool = True,
) -> bool:
    """Record that ``owner`` completed the LAST stage ``step`` of pass ``iteration`` and that the
    pass ended the analysis, in ONE transaction: :func:`complete_step`'s fence (``claimed``
    as there) and rows, and
    the finished row ``save_stage(finished=True)`` writes (``state``, terminal ``status``,
    ``report``, ``report_json``, ``signal``, ``confidence``, ``error`` redacted, ``finished_at``
    once; no checkpoint, attempt 0, no lease). The end of the pass then needs no
    ``should_continue`` task of its own, nor another commit.

    Returns ``True`` when the row was finished; ``False`` when the lease was lost (a re-driven
    copy finishes it). Raises ``ValueError`` for a running or unknown ``status`` or a malformed
    row (before any write), ``KeyError`` for an unknown stage.
    """
    stages.stage(step)
    check_status(status)
    if status not in TERMINAL_STATUSES:
        raise ValueError(f"finish_step writes done or failed, not {status!r}")
    tool_values = dedupe(
        tool_call_values(r, analysis_id=analysis_id, iteration=iteration) for r in tool_calls
    )
    llm_values = dedupe(llm_call_values(r, analysis_id=analysis_id) for r in llm_calls)
    optional = {
        "report": report,
        "report_json": report_json,
        "signal": signal,
        "confidence": confidence,
        "error": redact(error) if error is not None else None,
    }
    present = tuple(name for name, value in optional.items() if value is not None)
    params = {
        **_fence(analysis_id=analysis_id, iteration=iteration, step=step, owner=owner),
        "p_state": _packed(engine, analysis_id, state_for_row(state, report), tool_values),
        "p_status": status,
        "p_now": utc_now(),
        **{f"p_{name}": optional[name] for name in present},
    }
    if report_json is not None:  # the report repeats the state written with it: references
        params["p_report_json"] = state_refs.pack_report(report_json, params["p_state"])
    return _write_step(
        engine, _finish_statement(present, claimed), params, tool_values=tool_values, llm_values=llm_values
    )


def extend_lease(*, engine: Engine, analysis_id: str, owner: str | None, seconds: float) -> bool:
    """Extend the lease of an unfinished analysis to now + ``seconds``.

    ``owner`` a task id: that task's lease on its running step (a stage waiting for its retry
    countdown); ``updated_at`` moves too (the task is alive). ``owner=None``: the lease of an
    analysis WAITING for its next step (the recovery sweep found it behind a backlog in its
    queue, not lost); ``updated_at`` stays (a backlog is no progress). Returns ``False`` when the
    lease is not (or no longer) as described: another owner, or the analysis finished.
    """
    with begin_write(engine) as conn:
        result = conn.execute(_lease_extension(analysis_id=analysis_id, owner=owner, seconds=seconds))
    return result.rowcount == 1


def _lease_extension(*, analysis_id: str, owner: str | None, seconds: float) -> sa.Update:
    """The guarded ``UPDATE`` of :func:`extend_lease`."""
    now = utc_now()
    holder = ANALYSES.c.lease_owner.is_(None) if owner is None else ANALYSES.c.lease_owner == owner
    changes: dict[str, Any] = {"lease_expires_at": _lease_until(now, seconds)}
    if owner is not None:
        changes["updated_at"] = now
    return (
        sa.update(ANALYSES)
        .where(ANALYSES.c.id == analysis_id, holder, ANALYSES.c.status.not_in(TERMINAL_STATUSES))
        .values(**changes)
    )


def keep_attempt(
    *,
    engine: Engine,
    analysis_id: str,
    owner: str | None,
    seconds: float,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    llm_calls: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Keep what a failed attempt of a step leaves before its retry, in ONE transaction: its
    ``tool_calls``/``llm_calls`` rows (``ON CONFLICT (id) DO NOTHING``: a row written by an
    earlier attempt is kept once) and the lease extended to now + ``seconds`` as
    :func:`extend_lease` (``owner``: the task's own lease, ``None``: the lease of the step
    waiting to start). Returns whether the lease was extended.

    Raises ``ValueError`` for a malformed row (before any write) and
    ``sqlalchemy.exc.OperationalError`` when the database is unreachable (nothing is written:
    the caller carries the rows in the retry message).
    """
    tool_values = dedupe(tool_call_values(r) for r in tool_calls)
    llm_values = dedupe(llm_call_values(r) for r in llm_calls)
    with begin_write(engine) as conn:
        if tool_values:
            insert_rows(conn, TOOL_CALLS, tool_values)
        if llm_values:
            insert_rows(conn, LLM_CALLS, llm_values)
        result = conn.execute(_lease_extension(analysis_id=analysis_id, owner=owner, seconds=seconds))
    return result.rowcount == 1


def _stalled_at(moment: datetime) -> sa.ColumnElement[bool]:
    """Unfinished, with a lease that ran out before ``moment`` (a row without a lease, written
    before migration 0006 and not backfilled, counts as run out)."""
    return sa.and_(
        ANALYSES.c.status.not_in(TERMINAL_STATUSES),
        sa.or_(ANALYSES.c.lease_expires_at.is_(None), ANALYSES.c.lease_expires_at < moment),
    )


#: Columns the sweep and the status views read (not the heavy state/report).
PROGRESS_COLUMNS = (
    "id",
    "symbol",
    "as_of",
    "status",
    "iteration",
    "checkpoint",
    "attempt",
    "lease_owner",
    "lease_expires_at",
    "recoveries",
    "updated_at",
)


def stalled(*, engine: Engine, now: datetime | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Unfinished analyses whose lease expired before ``now`` (default: now), oldest lease
    first, at most ``limit``: the :data:`PROGRESS_COLUMNS` of each. A row without a lease (written
    before migration 0006 and not backfilled) counts as expired."""
    now = now or utc_now()
    stmt = (
        sa.select(*(ANALYSES.c[name] for name in PROGRESS_COLUMNS))
        .where(_stalled_at(now))
        .order_by(ANALYSES.c.lease_expires_at.nulls_first(), ANALYSES.c.id)
        .limit(limit)
    )
    return fetch_all(engine, stmt)


def count_stalled(*, engine: Engine, before: datetime) -> int:
    """How many unfinished analyses have a lease that expired before ``before`` (``/health``)."""
    stmt = sa.select(sa.func.count()).where(_stalled_at(before))
    with reading(engine) as conn:
        return int(conn.execute(stmt).scalar_one())


def take_for_recovery(
    *, engine: Engine, analysis_id: str, lease_seconds: float, now: datetime | None = None
) -> dict[str, Any] | None:
    """Take a stalled analysis for one re-drive: if its lease is STILL expired (another sweeper
    may have been first), increment ``recoveries``, drop the lease owner (the re-driven message
    will claim the step afresh), reset ``attempt`` and extend the lease to now +
    ``lease_seconds``, in one guarded ``UPDATE``.

    Returns the row's :data:`PROGRESS_COLUMNS` plus ``state`` after the update (``recoveries``
    counts this re-drive), or ``None`` when the row is finished, gone or no longer stalled.
    ``now``: the sweep's clock (default: now, UTC).
    """
    now = now or utc_now()
    with begin_write(engine) as conn:
        row = (
            conn.execute(
                sa.update(ANALYSES)
                .where(ANALYSES.c.id == analysis_id, _stalled_at(now))
                .values(
                    recoveries=ANALYSES.c.recoveries + 1,
                    lease_owner=None,
                    attempt=0,
                    lease_expires_at=_lease_until(now, lease_seconds),
                    updated_at=now,
                )
                .returning(*(ANALYSES.c[name] for name in PROGRESS_COLUMNS), ANALYSES.c.state)
            )
            .mappings()
            .first()
        )
        if row is None:
            return None
        taken = dict(row)
        taken["state"] = unpack_state(conn, taken["id"], taken["state"])
    return taken


def unfinished(*, engine: Engine, limit: int = 5000) -> list[dict[str, Any]]:
    """Every unfinished analysis, whatever its lease: the :data:`PROGRESS_COLUMNS` of each,
    oldest ``updated_at`` first, at most ``limit`` (the recovery sweep's candidates after the
    broker lost its messages, ``pipeline.steps.recovery.redrive_lost``)."""
    stmt = (
        sa.select(*(ANALYSES.c[name] for name in PROGRESS_COLUMNS))
        .where(ANALYSES.c.status.not_in(TERMINAL_STATUSES))
        .order_by(ANALYSES.c.updated_at, ANALYSES.c.id)
        .limit(limit)
    )
    return fetch_all(engine, stmt)


def progress_rows(*, engine: Engine, analysis_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{id: PROGRESS_COLUMNS}`` of the analyses ``analysis_ids`` that exist (finished or not)."""
    if not analysis_ids:
        return {}
    stmt = sa.select(*(ANALYSES.c[name] for name in PROGRESS_COLUMNS)).where(
        ANALYSES.c.id.in_(list(analysis_ids))
    )
    return {row["id"]: row for row in fetch_all(engine, stmt)}


#: The columns that say a row has not moved since it was read: every claim, checkpoint, lease
#: take and completion changes at least one of them (``updated_at`` moves with all but a
#: waiting lease's extension, which is no progress).
UNMOVED_COLUMNS = ("status", "iteration", "checkpoint", "lease_owner", "recoveries", "updated_at")


def take_lost(
    *, engine: Engine, seen: Mapping[str, Any], lease_seconds: float, now: datetime | None = None
) -> dict[str, Any] | None:
    """Take an analysis whose message the broker lost for one re-drive, whatever its lease: if
    its row is unfinished and still exactly as ``seen`` (a :data:`PROGRESS_COLUMNS` row read
    before the broker was inspected: :data:`UNMOVED_COLUMNS` equal), increment ``recoveries``,
    drop the lease owner (a worker that still runs the step then fails its checkpoint's fence
    and writes no state), reset ``attempt`` and lease the row to now + ``lease_seconds``, in
    one guarded ``UPDATE``.

    Returns the row's :data:`PROGRESS_COLUMNS` plus ``state`` after the update, or ``None`` when
    the row moved on meanwhile (a worker claimed or completed its step, another sweeper took
    it), finished or is gone. ``now``: the sweep's clock (default: now, UTC).
    """
    now = now or utc_now()
    unmoved = [ANALYSES.c[name].is_not_distinct_from(seen[name]) for name in UNMOVED_COLUMNS]
    with begin_write(engine) as conn:
        row = (
            conn.execute(
                sa.update(ANALYSES)
                .where(ANALYSES.c.id == seen["id"], ANALYSES.c.status.not_in(TERMINAL_STATUSES), *unmoved)
                .values(
                    recoveries=ANALYSES.c.recoveries + 1,
                    lease_owner=None,
                    attempt=0,
                    lease_expires_at=_lease_until(now, lease_seconds),
                    updated_at=now,
                )
                .returning(*(ANALYSES.c[name] for name in PROGRESS_COLUMNS), ANALYSES.c.state)
            )
            .mappings()
            .first()
        )
        if row is None:
            return None
        taken = dict(row)
        taken["state"] = unpack_state(conn, taken["id"], taken["state"])
    return taken


def give_back(*, engine: Engine, taken: Mapping[str, Any], now: datetime | None = None) -> bool:
    """Undo a take (:func:`take_for_recovery`, :func:`take_lost`) whose re-drive could not be
    published (the broker was unreachable): if the row is still as ``taken`` left it
    (:data:`UNMOVED_COLUMNS` equal), count the re-drive back (``recoveries`` - 1) and let the
    lease run out at ``now`` (default: now, UTC), so the next sweep tries again without having
    spent one of the analysis's recoveries. Returns whether the row was given back."""
    now = now or utc_now()
    unmoved = [ANALYSES.c[name].is_not_distinct_from(taken[name]) for name in UNMOVED_COLUMNS]
    with begin_write(engine) as conn:
        result = conn.execute(
            sa.update(ANALYSES)
            .where(ANALYSES.c.id == taken["id"], ANALYSES.c.status.not_in(TERMINAL_STATUSES), *unmoved)
            .values(recoveries=ANALYSES.c.recoveries - 1, lease_expires_at=now)
        )
    return result.rowcount == 1
