"""The SQL of the ledger's moves (``db.ledger``): the statuses a move reads and writes, and the
statements of the hot path, built once per process.

Building an expression (coercions, operators, the VALUES clause) cost as much client CPU as the
round trips (0.9 → 0.5 ms per claim, measured on PostgreSQL); built once, SQLAlchemy's compiled
cache serves their SQL text. Parameters are named ``p_*`` (SQLAlchemy reserves a column's own
name for the SET clause).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from datetime import date, datetime, timedelta
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from core import stages
from core.tenancy import DEFAULT_TENANT
from db.attempt_rows import CONTENT_BLOBS, LLM_CALLS, TOOL_CALLS, rows_cte
from db.repo import ANALYSES, ITERATIONS

QUEUED: Final = frozenset({stages.Status.QUEUED.value})
RUNNING: Final = frozenset(spec.status.value for spec in stages.STAGES)
UNFINISHED: Final = QUEUED | RUNNING
FINISHED: Final = frozenset(status.value for status in stages.TERMINAL_STATUSES)
#: The columns a finished row may set besides its state (a ``None`` argument keeps the column).
RESULT_COLUMNS: Final = ("report", "report_json", "signal", "confidence", "error")


def status_in(sources: Collection[str]) -> sa.ColumnElement[bool]:
    """``status`` is one of ``sources``: one comparison per status left out (or in), never an
    ``IN`` list (SQLAlchemy renders an IN list into the SQL text on every execution, ~0.05 ms of
    client CPU per statement)."""
    others = sorted(set(stages.ANALYSIS_STATUSES) - set(sources))
    if len(others) <= len(sources):
        return sa.and_(*(ANALYSES.c.status != status for status in others))
    return sa.or_(*(ANALYSES.c.status == status for status in sorted(sources)))


#: Columns the sweep and the status views read (not the heavy state/report).
PROGRESS_COLUMNS: Final = (
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
#: The columns that say a row has not moved since it was read: every claim, checkpoint, lease
#: take and completion changes at least one of them (``updated_at`` moves with all but a
#: waiting lease's extension, which is no progress).
UNMOVED_COLUMNS: Final = ("status", "iteration", "checkpoint", "lease_owner", "recoveries", "updated_at")


def stalled_at(moment: datetime) -> sa.ColumnElement[bool]:
    """Unfinished, with a lease that ran out before ``moment`` (a row without a lease, written
    before migration 0006 and not backfilled, counts as run out)."""
    return sa.and_(
        status_in(UNFINISHED),
        sa.or_(ANALYSES.c.lease_expires_at.is_(None), ANALYSES.c.lease_expires_at < moment),
    )


def unmoved(seen: Mapping[str, Any]) -> list[sa.ColumnElement[bool]]:
    """The row's :data:`UNMOVED_COLUMNS` are as in ``seen``."""
    return [ANALYSES.c[name].is_not_distinct_from(seen[name]) for name in UNMOVED_COLUMNS]


_B = sa.bindparam
_NOW = _B("p_now", type_=ANALYSES.c.updated_at.type)
_UNTIL = _B("p_until", type_=ANALYSES.c.lease_expires_at.type)
_STATE = _B("p_state", type_=ANALYSES.c.state.type)

#: The row is unfinished, in the step's pass (``p_iteration``) and checkpoint (``p_before``).
_IN_STEP = (
    ANALYSES.c.id == _B("p_id"),
    ANALYSES.c.iteration == _B("p_iteration"),
    status_in(UNFINISHED),
    ANALYSES.c.checkpoint.is_not_distinct_from(_B("p_before", type_=ANALYSES.c.checkpoint.type)),
)
#: Nobody else holds a live lease: no owner, this owner, or an expired lease (the claim's test).
_FREE_FOR_OWNER = sa.or_(
    ANALYSES.c.lease_owner.is_(None),
    ANALYSES.c.lease_owner == _B("p_owner"),
    ANALYSES.c.lease_expires_at < _B("p_now", type_=ANALYSES.c.lease_expires_at.type),
)

#: The claim of a step: its status, attempt + 1, the owner's lease; ``RETURNING`` the attempt.
CLAIM: Final = (
    sa.update(ANALYSES)
    .where(*_IN_STEP, _FREE_FOR_OWNER)
    .values(
        status=_B("p_status"),
        attempt=ANALYSES.c.attempt + 1,
        lease_owner=_B("p_owner"),
        lease_expires_at=_UNTIL,
        updated_at=_NOW,
    )
    .returning(ANALYSES.c.attempt)
)
#: The fence of a step's end: leased by its owner (``True``: the step was claimed) or, for a
#: step run without a claim (``pipeline.steps.claim.runs_unclaimed``), by nobody else.
_FENCED = {
    True: sa.update(ANALYSES).where(*_IN_STEP, ANALYSES.c.lease_owner == _B("p_owner")),
    False: sa.update(ANALYSES).where(*_IN_STEP, _FREE_FOR_OWNER),
}
#: The completion of a step, by ``claimed``: state, status, checkpoint, the next step's lease.
COMPLETE: Final = {
    claimed: fenced.values(
        state=_STATE,
        status=_B("p_status"),
        checkpoint=_B("p_checkpoint"),
        attempt=0,
        lease_owner=None,
        lease_expires_at=_UNTIL,
        updated_at=_NOW,
    )
    for claimed, fenced in _FENCED.items()
}


@functools.cache
def end_update(present: tuple[str, ...] | None, claimed: bool) -> sa.Update:
    """The fenced update of a step's end (``claimed`` as :data:`COMPLETE`): with ``present=None``
    the checkpoint (:data:`COMPLETE`); otherwise the row finished, setting the result columns
    ``present`` from ``p_<name>`` parameters (the others keep their values). At most 66
    variants, each built once."""
    if present is None:
        return COMPLETE[claimed]
    optional = {name: _B(f"p_{name}", type_=ANALYSES.c[name].type) for name in present}
    return _FENCED[claimed].values(
        state=_STATE,
        status=_B("p_status"),
        checkpoint=None,
        attempt=0,
        lease_owner=None,
        lease_expires_at=None,
        updated_at=_NOW,
        finished_at=sa.func.coalesce(ANALYSES.c.finished_at, _NOW),
        **optional,
    )


@functools.cache
def step_statement(update: sa.Update, tools: bool, llms: bool, pieces: bool) -> sa.Select[Any]:
    """PostgreSQL: ``update`` (a fenced step end) and the inserts of the step's rows
    (``p_tools``, ``p_llms``, ``p_blobs``: the tool results' pieces, ``db.blobs``) as ONE
    statement of data-modifying CTEs selecting how many rows the update changed: atomic on its
    own, so it runs autocommitted, one round trip instead of four (docs/benchmarks.md). The CTEs
    see one snapshot and all run whether or not the update matched (PostgreSQL manual,
    "Data-Modifying Statements in WITH"), which is the rule: the rows are facts either way."""
    done = update.returning(sa.literal_column("1")).cte("done")
    stmt = sa.select(sa.select(sa.func.count()).select_from(done).scalar_subquery())
    if pieces:
        stmt = stmt.add_cte(rows_cte(CONTENT_BLOBS, "blobs"))
    if tools:
        stmt = stmt.add_cte(rows_cte(TOOL_CALLS, "tools"))
    if llms:
        stmt = stmt.add_cte(rows_cte(LLM_CALLS, "llms"))
    return stmt


def forward(*, iteration: int, status: str) -> sa.ColumnElement[bool]:
    """The row's ``(iteration, rank(status))`` does not go back by moving to ``(iteration,
    status)`` (rank: queued -1 < each stage's place < done = failed, ``core.stages.STATUS_RANK``)
    and it is not archived (an archived record is final, ``db.archive``)."""
    stored = sa.case(
        *((ANALYSES.c.status == name, value) for name, value in stages.STATUS_RANK.items()), else_=-1
    )
    return sa.and_(
        sa.or_(
            ANALYSES.c.iteration < iteration,
            sa.and_(ANALYSES.c.iteration == iteration, stored <= stages.STATUS_RANK[status]),
        ),
        ANALYSES.c.archived_at.is_(None),
    )


def new_row(
    *,
    analysis_id: str,
    symbol: str,
    as_of: date | str,
    user_query: str,
    max_iterations: int,
    state: dict[str, Any],
    now: datetime,
    lease_seconds: float,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
) -> dict[str, Any]:
    """The column values of a new row: ``queued``, no checkpoint, its lease until ``now +
    lease_seconds`` (a first stage nobody starts within it is re-driven), the ``iteration`` of
    ``state`` (default 0)."""
    return {
        "id": analysis_id,
        "symbol": symbol,
        "as_of": as_of if isinstance(as_of, date) else date.fromisoformat(as_of),
        "status": stages.Status.QUEUED.value,
        "checkpoint": None,
        "attempt": 0,
        "lease_owner": None,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "recoveries": 0,
        "iteration": int(state.get("iteration", 0)),
        "max_iterations": max_iterations,
        "user_query": user_query,
        "state": state,
        "created_at": now,
        "updated_at": now,
        "tenant": tenant,
        "api_key_id": api_key_id,
    }


@functools.cache
def create_and_claim_statement(columns: tuple[str, ...], llms: bool) -> sa.Insert:
    """PostgreSQL: a new row (``a_<column>`` parameters for ``columns``, the keys of
    :func:`new_row`), its ``llm_calls`` rows (``p_llms``, when ``llms``) and the claim of pass 0
    as ONE statement of data-modifying CTEs, each ``ON CONFLICT DO NOTHING``, ``RETURNING`` the
    claim when this statement made it (PostgreSQL manual, "Data-Modifying Statements in WITH";
    the foreign key is checked at the end of the statement)."""
    analysis = (
        postgresql.insert(ANALYSES)
        .values({name: _B(f"a_{name}", type_=ANALYSES.c[name].type) for name in columns})
        .on_conflict_do_nothing(index_elements=["id"])
        .cte("analysis")
    )
    claim = (
        postgresql.insert(ITERATIONS)
        .values(
            analysis_id=_B("a_id", type_=ITERATIONS.c.analysis_id.type),
            iteration=0,
            created_at=_B("a_created_at", type_=ITERATIONS.c.created_at.type),
            celery_task_id=None,
        )
        .on_conflict_do_nothing(index_elements=["analysis_id", "iteration"])
        .returning(ITERATIONS.c.analysis_id)
        .add_cte(analysis)
    )
    return claim.add_cte(rows_cte(LLM_CALLS, "llms")) if llms else claim
