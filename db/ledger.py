"""The ledger of the ``analyses`` row: every write that moves an analysis, as a declared table of
allowed moves (:data:`MOVES`) and one function per move.

The row is the record of truth of an analysis (docs/architecture.md, "Durability"): its
``status``, ``iteration`` (the pass), ``checkpoint`` (the last completed stage of the pass; the
stored ``state`` is the state after it), ``attempt`` (claims of the current step), the lease
(``lease_owner``, ``lease_expires_at``) and ``recoveries`` (re-drives by the sweep). A broker
message is only a delivery; what may happen to the row is declared in :data:`MOVES` (each move:
the statuses it moves from, those it may write, its fence in words) and done by one function per
move (:func:`create`, :func:`claim`, :func:`complete`, :func:`finish`, :func:`hand_off`,
:func:`end`, :func:`cancel`, :func:`keep`, :func:`wait`, :func:`take`, :func:`give_back`), each
one guarded statement whose status condition is read from the table (docs/architecture.md,
"The ledger", has the table in words).

A move is refused before anything is written when it asks for a status its row of the table
does not allow (:class:`MoveRefused`); the ``from`` column is part of the guarded ``UPDATE`` (a
row in another status is left alone, and the move answers ``False`` or ``None``). Every move is
one transaction (on PostgreSQL the hot ones one autocommitted statement,
``db.engine.single_statement``) and safe to race: PostgreSQL's row lock serialises concurrent
updaters and re-evaluates the ``WHERE`` on the new row version under READ COMMITTED; SQLite
writers are serialised by ``BEGIN IMMEDIATE`` (``db.engine.begin_write``). The reads of the
same columns (the sweep's candidates, ``/health``) are ``db.progress_repo``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any, Final, NamedTuple

import sqlalchemy as sa
from sqlalchemy import Engine

from core import stages
from core.masking import mask_text
from core.tenancy import DEFAULT_TENANT
from db._sql import insert_if_absent, insert_ignore, utc_now
from db.attempt_rows import LLM_CALLS, dedupe, insert_rows, llm_call_values, step_rows
from db.engine import begin_write, reading, single_statement
from db.ledger_moves import MOVES as MOVES  # the table of moves, read through this module too
from db.ledger_moves import Move, MoveRefused
from db.ledger_moves import Rule as Rule
from db.ledger_moves import check as check
from db.ledger_sql import (
    CLAIM,
    FINISHED,
    PROGRESS_COLUMNS,
    RESULT_COLUMNS,
    UNFINISHED,
    create_and_claim_statement,
    end_update,
    forward,
    new_row,
    stalled_at,
    status_in,
    step_statement,
    unmoved,
)
from db.ledger_sql import UNMOVED_COLUMNS as UNMOVED_COLUMNS  # the sweep compares rows by them
from db.redact import redact
from db.repo import (
    ANALYSES,
    DEFAULT_LEASE_SECONDS,
    ITERATIONS,
    AnalysisNotFoundError,
    pack_row,
    unpack_state,
)

logger = logging.getLogger(__name__)


def _target(move: Move, status: str) -> str:
    """``status`` checked against the targets of ``move`` (:class:`MoveRefused`, a
    ``ValueError``; a status outside the stage table is no move's target: the table's statuses
    are checked against the stage table once, at import, ``db.ledger_moves``)."""
    targets = MOVES[move].targets
    if targets is None or status not in targets:
        said = "keeps the status" if targets is None else f"writes {' | '.join(sorted(targets))}"
        raise MoveRefused(f"the ledger's move {move.value} {said}, not {status!r}")
    return status


def _from(move: Move) -> sa.ColumnElement[bool]:
    """The status part of ``move``'s guard: its sources in the table."""
    return status_in(MOVES[move].sources)


# --- create ---------------------------------------------------------------------------------------


def create(
    *,
    engine: Engine,
    analysis_id: str,
    symbol: str,
    as_of: date | str,
    user_query: str,
    max_iterations: int,
    state: dict[str, Any],
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
) -> bool:
    """Insert the row of a new analysis (:data:`Move.CREATE`): status ``queued``, its lease
    starting now. ``state``: ``FinancialAgentState.to_message()`` (its ``iteration``, default 0,
    is the row's). Returns ``True`` if inserted, ``False`` if a row with this id existed (left
    untouched: ``ON CONFLICT DO NOTHING`` on ``pk_analyses``, the table's only unique
    constraint)."""
    values = new_row(
        analysis_id=analysis_id,
        symbol=symbol,
        as_of=as_of,
        user_query=user_query,
        max_iterations=max_iterations,
        state=state,
        now=utc_now(),
        lease_seconds=lease_seconds,
    )
    with begin_write(engine) as conn:
        return insert_if_absent(conn, ANALYSES, values)


def create_and_claim(
    *,
    engine: Engine,
    analysis_id: str,
    symbol: str,
    as_of: date | str,
    user_query: str,
    max_iterations: int,
    state: dict[str, Any],
    llm_calls: Sequence[Mapping[str, Any]] = (),
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
) -> bool:
    """:func:`create`, its ``llm_calls`` rows and the claim of pass 0 (:func:`claim_pass`) in ONE
    transaction (the producer's path). The row belongs to ``tenant`` and records the API key
    that enqueued it (``None``: CLI, Python API, beat).

    Each insert is ``ON CONFLICT DO NOTHING`` on its table's primary key (each table's only
    unique constraint), so a repeated producer (the same ``analysis_id``) changes nothing.
    Returns ``True`` when this call claimed pass 0 (the caller must enqueue the chain).
    Raises ``ValueError`` for a malformed ``llm_calls`` row (before any write).
    """
    llm_values = dedupe(llm_call_values(r, analysis_id=analysis_id) for r in llm_calls)
    now = utc_now()
    values = new_row(
        analysis_id=analysis_id,
        symbol=symbol,
        as_of=as_of,
        user_query=user_query,
        max_iterations=max_iterations,
        state=state,
        now=now,
        lease_seconds=lease_seconds,
        tenant=tenant,
        api_key_id=api_key_id,
    )
    if engine.dialect.name == "postgresql":
        params = {f"a_{name}": value for name, value in values.items()}
        if llm_values:
            params["p_llms"] = llm_values
        stmt = create_and_claim_statement(tuple(values), bool(llm_values))
        with single_statement(engine) as conn:
            return conn.execute(stmt, params).first() is not None
    with begin_write(engine) as conn:
        conn.execute(insert_ignore(conn, ANALYSES).values(values))
        insert_rows(conn, LLM_CALLS, llm_values)
        return insert_if_absent(
            conn,
            ITERATIONS,
            {"analysis_id": analysis_id, "iteration": 0, "created_at": now, "celery_task_id": None},
        )


@dataclass(frozen=True)
class NewAnalysis:
    """One row of :func:`create_and_claim_many`: the arguments of :func:`create_and_claim`
    that differ between analyses."""

    analysis_id: str
    symbol: str
    as_of: date
    user_query: str
    max_iterations: int
    state: dict[str, Any]


def create_and_claim_many(
    *,
    engine: Engine,
    analyses: Sequence[NewAnalysis],
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
) -> set[str]:
    """:func:`create_and_claim` of many analyses (no LLM rows; one ``tenant`` and
    ``api_key_id`` for all: a backtest's or a watchlist run's) in ONE transaction of two
    multi-row inserts (parameter lists SQLAlchemy sends as multi-row ``VALUES``), each ``ON
    CONFLICT DO NOTHING``, the claims ``RETURNING`` the ids they inserted. Returns those ids:
    the analyses whose chains the caller must send (docs/benchmarks.md, "Bulk enqueue")."""
    if not analyses:
        return set()
    now = utc_now()
    rows = [
        new_row(
            analysis_id=a.analysis_id,
            symbol=a.symbol,
            as_of=a.as_of,
            user_query=a.user_query,
            max_iterations=a.max_iterations,
            state=a.state,
            now=now,
            lease_seconds=lease_seconds,
            tenant=tenant,
            api_key_id=api_key_id,
        )
        for a in analyses
    ]
    claims = [
        {"analysis_id": a.analysis_id, "iteration": 0, "created_at": now, "celery_task_id": None}
        for a in analyses
    ]
    with begin_write(engine) as conn:
        # parameter lists, not ``.values(rows)``: the statements compile once and stay in
        # SQLAlchemy's cache (a 100-row VALUES clause compiled afresh cost ~0.1 s per batch)
        conn.execute(insert_ignore(conn, ANALYSES), rows)
        claim_stmt = insert_ignore(conn, ITERATIONS).returning(ITERATIONS.c.analysis_id)
        return {str(r[0]) for r in conn.execute(claim_stmt, claims)}


# --- claim, complete, finish: the fenced step -----------------------------------------------------


class ClaimOutcome(StrEnum):
    """What :func:`claim` found: ``claimed`` (this owner holds the step's lease now and must
    run it), ``busy`` (another owner holds a live lease on the same step: a duplicate message),
    ``stale`` (the row moved past the step, or the analysis is finished or gone)."""

    CLAIMED = "claimed"
    BUSY = "busy"
    STALE = "stale"


@dataclass(frozen=True)
class StepClaim:
    """What :func:`claim` answered: the outcome, the attempt number of the step (counting this
    claim when claimed; 0 when not), and the row's status and checkpoint as found."""

    outcome: ClaimOutcome
    attempt: int
    status: str | None
    checkpoint: str | None


def claim(
    *, engine: Engine, analysis_id: str, iteration: int, step: str, owner: str, lease_seconds: float
) -> StepClaim:
    """Claim stage ``step`` of pass ``iteration`` for ``owner`` (a Celery task id): the row
    takes the stage's status, ``attempt`` + 1, ``lease_owner`` = ``owner``, a lease until now +
    ``lease_seconds`` (:data:`Move.CLAIM`), iff it is unfinished, in pass ``iteration``, its
    checkpoint is the stage before ``step`` and nobody else holds a live lease (no owner, the
    same owner: a Celery retry or a redelivery keeps its task id, or an expired lease).

    Returns a :class:`StepClaim`. Raises ``KeyError`` for an unknown stage.
    """
    spec = stages.stage(step)
    before = stages.step_before(step)
    now = utc_now()
    params = {
        "p_id": analysis_id,
        "p_iteration": iteration,
        "p_before": before,
        "p_owner": owner,
        "p_now": now,
        "p_status": _target(Move.CLAIM, spec.status.value),
        "p_until": now + timedelta(seconds=lease_seconds),
    }
    with single_statement(engine) as conn:
        claimed = conn.execute(CLAIM, params).first()
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
    same_step = status in UNFINISHED and row_iteration == iteration and checkpoint == before
    return StepClaim(ClaimOutcome.BUSY if same_step else ClaimOutcome.STALE, 0, status, checkpoint)


@dataclass(frozen=True)
class StepEnd:
    """What ends a step (:func:`complete`, :func:`finish`): the analysis, its pass, the step,
    the owner of its lease (``claimed=False``: the step ran without a claim, its end then
    fenced by "nobody else holds a live lease"), the state after it (a message) and its
    ``tool_calls``/``llm_calls`` rows."""

    analysis_id: str
    iteration: int
    step: str
    owner: str
    state: dict[str, Any]
    tool_calls: Sequence[Mapping[str, Any]] = ()
    llm_calls: Sequence[Mapping[str, Any]] = ()
    claimed: bool = True


def complete(*, engine: Engine, end: StepEnd, status: str, lease_seconds: float) -> bool:
    """Record that ``end.owner`` completed ``end.step`` (:data:`Move.COMPLETE`), in ONE
    transaction fenced as the claim (and by the owner's lease, or with ``claimed=False`` by
    nobody else's): the state, ``status`` (a running status: the next step's), ``checkpoint`` =
    the step, ``attempt`` 0, no owner, a lease until now + ``lease_seconds`` (the next step must
    start within it); and the step's rows (``ON CONFLICT (id) DO NOTHING``) whether or not the
    fence held: attempts that happened are facts, and their ids are deterministic.

    Returns ``True`` when the row moved; ``False`` when the lease was lost (the caller must not
    hand the state on). Raises :class:`MoveRefused` for a finished or unknown ``status``,
    ``ValueError`` for a malformed row, ``KeyError`` for an unknown stage (before any write).
    """
    now = utc_now()
    params = {
        "p_status": _target(Move.COMPLETE, status),
        "p_checkpoint": end.step,
        "p_until": now + timedelta(seconds=lease_seconds),
    }
    return _end_step(engine, end, params, now=now, results=None)


def finish(
    *,
    engine: Engine,
    end: StepEnd,
    status: str,
    report: str | None,
    report_json: dict[str, Any] | None,
    signal: str | None,
    confidence: float | None,
    error: str | None,
) -> bool:
    """Record that ``end.owner`` completed the LAST step of a pass that ended the analysis
    (:data:`Move.FINISH`), in ONE transaction fenced as :func:`complete`: the finished state,
    ``status`` (done or failed), the result columns that are not ``None`` (``report``,
    ``report_json``, ``signal``, ``confidence``, ``error``), ``finished_at`` once, no
    checkpoint, attempt 0, no lease; and the step's rows. ``error`` is stored as given: its
    one writer, the end of a pass, redacts it where it is written (``db.redact.redact`` in
    ``pipeline.stages.ending``), as the stage's rows are redacted here.

    Returns ``True`` when the row was finished; ``False`` when the lease was lost (a re-driven
    copy finishes it). Raises :class:`MoveRefused` for a running ``status``, ``ValueError`` /
    ``KeyError`` as :func:`complete`.
    """
    params = {"p_status": _target(Move.FINISH, status)}
    results = _results(
        report=report, report_json=report_json, signal=signal, confidence=confidence, error=error
    )
    return _end_step(engine, end, params, now=utc_now(), results=results)


def _results(**values: Any) -> dict[str, Any]:
    """The result columns given (not ``None``)."""
    return {name: values[name] for name in RESULT_COLUMNS if values.get(name) is not None}


def _end_step(
    engine: Engine, end: StepEnd, params: dict[str, Any], *, now: datetime, results: dict[str, Any] | None
) -> bool:
    """Write a step's end: everything it writes is prepared first, then ONE statement runs once,
    all on one connection (``db.engine.single_statement``); ``True`` when the row moved.
    ``params``: the move's own (``p_status`` and, for a checkpoint, ``p_checkpoint``,
    ``p_until``); ``results``: the result columns of a finished row (:func:`_results`), ``None``
    for a checkpoint.

    Prepared: the step's checkpoint before it (the one stage lookup: ``KeyError`` before any
    write), its rows (``db.attempt_rows.step_rows``: validated, redacted, their pieces taken),
    the state and the JSON report as the row stores them (``db.repo.pack_row``: a finished
    state, which stays, against every step's results, read on the connection first; a
    checkpoint's against this step's rows, no read). Written: the fenced update
    (``db.ledger_sql.end_update``) with the rows; PostgreSQL: one statement of data-modifying
    CTEs (``db.ledger_sql.step_statement``), autocommitted; SQLite: one ``BEGIN IMMEDIATE``
    transaction (the read inside it)."""
    before = stages.step_before(end.step)
    rows = step_rows(end.tool_calls, end.llm_calls, analysis_id=end.analysis_id, iteration=end.iteration)
    final = dict(results) if results is not None else None
    with single_statement(engine) as conn:
        state, report_json = pack_row(
            conn if final is not None else None,
            end.analysis_id,
            end.state,
            report=final.get("report") if final else None,
            report_json=final.get("report_json") if final else None,
            pending=rows.tools,
        )
        if final is not None and report_json is not None:  # the report repeats the state beside it
            final["report_json"] = report_json
        params.update({f"p_{name}": value for name, value in (final or {}).items()})
        params.update(p_state=state, p_id=end.analysis_id, p_iteration=end.iteration, p_before=before)
        params.update(p_owner=end.owner, p_now=now)
        update = end_update(None if final is None else tuple(final), end.claimed)
        if engine.dialect.name == "postgresql":
            stmt = step_statement(update, bool(rows.tools), bool(rows.llms), bool(rows.pieces))
            changed: int = conn.execute(stmt, {**params, **rows.params()}).scalar_one()
            return changed == 1
        applied = conn.execute(update, params).rowcount == 1
        rows.insert(conn)
    return applied


# --- hand_off and end: the pass boundary outside a fenced step ------------------------------------


def claim_pass(
    *, engine: Engine, analysis_id: str, iteration: int, celery_task_id: str | None = None
) -> bool:
    """Claim pass ``iteration`` of ``analysis_id`` before handing off to it (an
    ``analysis_iterations`` row; the analyses row is not touched): ``True`` only for the first
    caller, ever (its primary key ``(analysis_id, iteration)``, the table's only unique
    constraint, and ``ON CONFLICT DO NOTHING``). Raises ``sqlalchemy.exc.IntegrityError`` if no
    analysis has this id."""
    with begin_write(engine) as conn:
        row = {"analysis_id": analysis_id, "iteration": iteration, "celery_task_id": celery_task_id}
        return insert_if_absent(conn, ITERATIONS, {**row, "created_at": utc_now()})


class PassClaim(NamedTuple):
    """The row and the claim of a pass as a delivery that lost that claim sees them
    (:func:`pass_claim`): the row's ``status``, ``iteration`` and ``updated_at`` (UTC), and the
    claim's ``claimant`` (Celery task id, may be ``None``) and ``claimed_at`` (UTC)."""

    status: str
    iteration: int
    updated_at: datetime
    claimant: str | None
    claimed_at: datetime


def pass_claim(*, engine: Engine, analysis_id: str, iteration: int) -> PassClaim | None:
    """The row and the claim of pass ``iteration`` in one primary-key join, or ``None`` when
    either is missing (read only by a delivery whose :func:`claim_pass` lost)."""
    query = sa.select(
        ANALYSES.c.status,
        ANALYSES.c.iteration,
        ANALYSES.c.updated_at,
        ITERATIONS.c.celery_task_id,
        ITERATIONS.c.created_at,
    ).join(
        ITERATIONS,
        sa.and_(ITERATIONS.c.analysis_id == ANALYSES.c.id, ITERATIONS.c.iteration == iteration),
    )
    with reading(engine) as conn:
        row = conn.execute(query.where(ANALYSES.c.id == analysis_id)).first()
    return PassClaim(*row) if row is not None else None


def hand_off(*, engine: Engine, analysis_id: str, state: dict[str, Any], lease_seconds: float) -> bool:
    """Start the next pass (:data:`Move.HAND_OFF`): the row takes ``state`` (the next pass's
    first state: its ``iteration`` and ``status``), no checkpoint, attempt 0, no owner, a lease
    until now + ``lease_seconds``, under the forward rule (:func:`_boundary`). Returns whether it
    moved (``False``: a late copy). Raises ``AnalysisNotFoundError``, and
    :class:`MoveRefused` for a status other than the first stage's."""
    status, iteration = _target(Move.HAND_OFF, str(state.get("status"))), int(state["iteration"])
    return _boundary(engine, Move.HAND_OFF, analysis_id, state, status, iteration, lease_seconds, {})


def end(
    *,
    engine: Engine,
    analysis_id: str,
    state: dict[str, Any],
    status: str,
    iteration: int,
    report: str | None,
    report_json: dict[str, Any] | None,
    signal: str | None,
    confidence: float | None,
    error: str | None,
) -> bool:
    """Finish an analysis outside the fenced step (:data:`Move.END`: the ``should_continue``
    task of a re-driven hand-off, a failure: ``pipeline.steps.close``): the row takes ``state``,
    ``status`` (done or failed), the result columns given (as :func:`finish`; ``error``
    redacted here: ``db.redact``, a failure's text may quote anything), ``finished_at`` once, no
    checkpoint, no lease, under the forward rule. Returns whether it moved. Raises
    ``AnalysisNotFoundError`` and :class:`MoveRefused` for a running ``status``."""
    error = redact(error) if error is not None else None
    results = _results(
        report=report, report_json=report_json, signal=signal, confidence=confidence, error=error
    )
    return _boundary(engine, Move.END, analysis_id, state, _target(Move.END, status), iteration, 0, results)


def _boundary(
    engine: Engine,
    move: Move,
    analysis_id: str,
    state: dict[str, Any],
    status: str,
    iteration: int,
    lease_seconds: float,
    results: dict[str, Any],
) -> bool:
    """The guarded write of :func:`hand_off` and :func:`end`: the row's ``(iteration,
    rank(status))`` only moves forward (rank: queued -1 < each stage's place < done = failed),
    a finished row only by its own status again (:attr:`Rule.again`: a redelivered copy
    rewrites it with the same data), and an archived row is final (``db.archive``). So a late
    copy of an earlier pass changes nothing, and ``failed`` never replaces ``done``. ``status``
    is the move's target as :func:`_target` checked it."""
    now = utc_now()
    finished = status in FINISHED
    changes: dict[str, Any] = {
        "status": status,
        "iteration": iteration,
        "updated_at": now,
        "checkpoint": None,
        "attempt": 0,
        "lease_owner": None,
        "lease_expires_at": None if finished else now + timedelta(seconds=lease_seconds),
        **results,
    }
    if finished:
        changes["finished_at"] = sa.func.coalesce(ANALYSES.c.finished_at, now)
    guard = sa.and_(
        ANALYSES.c.id == analysis_id,
        forward(iteration=iteration, status=status),
        sa.or_(_from(move), ANALYSES.c.status == status) if MOVES[move].again else _from(move),
    )
    with begin_write(engine) as conn:
        changes["state"], report_json = pack_row(
            conn, analysis_id, state, report=results.get("report"), report_json=results.get("report_json")
        )
        if report_json is not None:
            changes["report_json"] = report_json
        applied = conn.execute(sa.update(ANALYSES).where(guard).values(**changes)).rowcount == 1
        if (
            not applied
            and conn.execute(sa.select(ANALYSES.c.id).where(ANALYSES.c.id == analysis_id)).first() is None
        ):
            raise AnalysisNotFoundError(analysis_id)
    said = (move.value, analysis_id, iteration, status, applied)
    (logger.debug if applied else logger.info)("%s analysis=%s iteration=%d status=%s applied=%s", *said)
    return applied


# --- cancel ---------------------------------------------------------------------------------------

#: Error code written into an analysis cancelled before a worker started it.
CANCELLED: Final = "CANCELLED"
# SQLite allows at most 32766 bound parameters per statement; 500 ids per IN list stay far below.
_ID_CHUNK: Final = 500


def cancel(*, engine: Engine, analysis_ids: Sequence[str], reason: str) -> list[str]:
    """Fail every analysis of ``analysis_ids`` that no worker has started (:data:`Move.CANCEL`:
    ``queued``, no checkpoint, no lease owner) with ``error = "CANCELLED: <reason>"`` (masked, at
    most 1000 characters) and ``finished_at`` now, one guarded ``UPDATE`` per 500 ids; a claimed
    or finished one is left alone (it runs to its end: the claim refuses a finished row).
    Returns the ids cancelled."""
    now = utc_now()
    ids = list(analysis_ids)
    cancelled: list[str] = []
    with begin_write(engine) as conn:
        for start in range(0, len(ids), _ID_CHUNK):
            rows = conn.execute(
                sa.update(ANALYSES)
                .where(
                    ANALYSES.c.id.in_(ids[start : start + _ID_CHUNK]),
                    _from(Move.CANCEL),
                    ANALYSES.c.checkpoint.is_(None),
                    ANALYSES.c.lease_owner.is_(None),
                )
                .values(
                    status=_target(Move.CANCEL, stages.Status.FAILED.value),
                    error=mask_text(f"{CANCELLED}: {reason}")[:1000],
                    finished_at=now,
                    updated_at=now,
                    lease_expires_at=None,
                )
                .returning(ANALYSES.c.id)
            ).all()
            cancelled.extend(str(r[0]) for r in rows)
    return cancelled


# --- keep, wait: the lease ------------------------------------------------------------------------


def _lease(move: Move, *, analysis_id: str, owner: str | None, seconds: float) -> sa.Update:
    """The guarded ``UPDATE`` of a lease: ``owner``'s (``updated_at`` moves too: the task is
    alive) or, with ``owner=None``, the lease of a step nobody holds (``updated_at`` stays: a
    wait is no progress)."""
    now = utc_now()
    holder = ANALYSES.c.lease_owner.is_(None) if owner is None else ANALYSES.c.lease_owner == owner
    changes: dict[str, Any] = {"lease_expires_at": now + timedelta(seconds=seconds)}
    if owner is not None:
        changes["updated_at"] = now
    return sa.update(ANALYSES).where(ANALYSES.c.id == analysis_id, holder, _from(move)).values(**changes)


def keep(
    *,
    engine: Engine,
    analysis_id: str,
    owner: str | None,
    seconds: float,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    llm_calls: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Keep what an attempt leaves before its retry (:data:`Move.KEEP`), in ONE transaction:
    its ``tool_calls``/``llm_calls`` rows (``ON CONFLICT (id) DO NOTHING``) and the lease
    extended to now + ``seconds`` (``owner``: the task's own lease; ``None``: the lease of the
    step waiting to start, which the previous checkpoint set). Returns whether the lease was
    extended. Raises ``ValueError`` for a malformed row (before any write) and
    ``sqlalchemy.exc.OperationalError`` when the database is unreachable (nothing is written:
    the caller carries the rows in the retry message)."""
    lease = _lease(Move.KEEP, analysis_id=analysis_id, owner=owner, seconds=seconds)
    rows = step_rows(tool_calls, llm_calls)
    with begin_write(engine) as conn:
        rows.insert(conn)
        result = conn.execute(lease)
    return result.rowcount == 1


def wait(*, engine: Engine, analysis_id: str, seconds: float) -> bool:
    """Extend to now + ``seconds`` the lease of an analysis WAITING for its next step
    (:data:`Move.WAIT`: the sweep found it behind a backlog in its queue, not lost);
    ``updated_at`` stays (a backlog is no progress). Returns ``False`` when a worker holds the
    step meanwhile or the analysis finished."""
    with begin_write(engine) as conn:
        result = conn.execute(_lease(Move.WAIT, analysis_id=analysis_id, owner=None, seconds=seconds))
    return result.rowcount == 1


# --- take, give_back: the recovery sweep ----------------------------------------------------------


def take(
    *,
    engine: Engine,
    seen: Mapping[str, Any],
    lease_seconds: float,
    expired: bool,
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """Take an analysis for one re-drive (:data:`Move.TAKE`): ``recoveries`` + 1, no lease owner
    (the re-driven message claims the step afresh; a worker that still runs it fails its
    checkpoint's fence and writes no state), ``attempt`` 0, a lease until now +
    ``lease_seconds``, in one ``UPDATE`` guarded by the row as ``seen`` (a
    :data:`PROGRESS_COLUMNS` row: :data:`UNMOVED_COLUMNS` equal) and, with ``expired`` (the
    recovery sweep), by a lease that ran out before ``now``. So of two sweepers one takes it,
    and a step a worker claims or completes meanwhile is never re-driven.

    Returns the row's :data:`PROGRESS_COLUMNS` plus ``state`` (whole) after the update, or
    ``None`` when the row moved, finished or is gone. ``now``: the sweep's clock (default now).
    """
    now = now or utc_now()
    fence = stalled_at(now) if expired else _from(Move.TAKE)
    with begin_write(engine) as conn:
        row = (
            conn.execute(
                sa.update(ANALYSES)
                .where(ANALYSES.c.id == seen["id"], fence, *unmoved(seen))
                .values(
                    recoveries=ANALYSES.c.recoveries + 1,
                    lease_owner=None,
                    attempt=0,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
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
    """Undo a :func:`take` whose re-drive could not be published (the broker was unreachable):
    if the row is still as ``taken`` left it (:data:`UNMOVED_COLUMNS` equal), ``recoveries`` - 1
    and the lease runs out at ``now`` (default now), so the next sweep tries again without
    having spent one of the analysis's recoveries (:data:`Move.GIVE_BACK`). Returns whether the
    row was given back."""
    now = now or utc_now()
    with begin_write(engine) as conn:
        result = conn.execute(
            sa.update(ANALYSES)
            .where(ANALYSES.c.id == taken["id"], _from(Move.GIVE_BACK), *unmoved(taken))
            .values(recoveries=ANALYSES.c.recoveries - 1, lease_expires_at=now)
        )
    return result.rowcount == 1
