"""Data access for backtests and the forward scorecard (keyword-only functions, rows as dicts).

Idempotency as everywhere in ``db`` (docs/design.md, "Durability and idempotency"): a backtest
is keyed by its name, an
item by ``(backtest_name, symbol, as_of)`` and a score by ``(analysis_id, horizon)``, all written
with ``INSERT … ON CONFLICT DO NOTHING``; so re-running a backtest or the scoring task writes
nothing twice. Cancelling an analysis is a move of its row's ledger (``db.ledger.cancel``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Engine

from db._sql import fetch_all, fetch_one, insert_if_absent, insert_ignore, utc_now
from db.engine import begin_write
from db.ledger import CANCELLED as CANCELLED  # the error code of db.ledger.cancel
from db.models import BACKTEST_ITEMS, BACKTESTS, RECOMMENDATION_SCORES
from db.repo import ANALYSES, TERMINAL_STATUSES

ITEMS: Final = BACKTEST_ITEMS
SCORES: Final = RECOMMENDATION_SCORES

# SQLite allows at most 32766 bound parameters per statement; 500 ids per IN list stay far below.
_ID_CHUNK: Final = 500


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(ids), _ID_CHUNK):
        yield ids[start : start + _ID_CHUNK]


# --------------------------------------------------------------------------------------------
# Backtests and their items
# --------------------------------------------------------------------------------------------


def create_backtest(
    *,
    engine: Engine,
    name: str,
    symbols: Sequence[str],
    start_date: date,
    end_date: date,
    every: str,
    analysis_type: str,
) -> tuple[dict[str, Any], bool]:
    """Create backtest ``name`` unless it exists. Returns ``(row, created)``; an existing row is
    returned unchanged (the caller compares its grid with the request)."""
    with begin_write(engine) as conn:
        created = insert_if_absent(
            conn,
            BACKTESTS,
            {
                "name": name,
                "symbols": list(symbols),
                "start_date": start_date,
                "end_date": end_date,
                "every": every,
                "analysis_type": analysis_type,
                "created_at": utc_now(),
            },
        )
    row = get_backtest(engine=engine, name=name)
    assert row is not None
    return row, created


def get_backtest(*, engine: Engine, name: str) -> dict[str, Any] | None:
    """The backtest row named ``name`` (``None`` when unknown)."""
    return fetch_one(engine, sa.select(BACKTESTS).where(BACKTESTS.c.name == name))


def backtest_has_tenant(*, engine: Engine, name: str, tenant: str) -> bool:
    """Whether backtest ``name`` has an analysis owned by ``tenant`` (a tenant's scorecard knows
    only such backtests; every other name answers as an unknown one)."""
    stmt = (
        sa.select(ITEMS.c.analysis_id)
        .select_from(ITEMS.join(ANALYSES, ANALYSES.c.id == ITEMS.c.analysis_id))
        .where(ITEMS.c.backtest_name == name, ANALYSES.c.tenant == tenant)
        .limit(1)
    )
    return fetch_one(engine, stmt) is not None


def list_backtests(*, engine: Engine) -> list[dict[str, Any]]:
    """Every backtest row, newest first."""
    return fetch_all(engine, sa.select(BACKTESTS).order_by(BACKTESTS.c.created_at.desc()))


def add_item(
    *,
    engine: Engine,
    backtest_name: str,
    symbol: str,
    as_of: date,
    requested_date: date,
    status: str,
    analysis_id: str | None = None,
    error: str | None = None,
) -> bool:
    """Record one grid point (``enqueued`` with its analysis id, or ``refused`` with the reason).
    ON CONFLICT DO NOTHING on the primary key ``(backtest_name, symbol, as_of)``, the table's
    only unique constraint: ``False`` when it was recorded already."""
    with begin_write(engine) as conn:
        return insert_if_absent(
            conn,
            ITEMS,
            {
                "backtest_name": backtest_name,
                "symbol": symbol,
                "as_of": as_of,
                "requested_date": requested_date,
                "status": status,
                "attempt": 0,
                "analysis_id": analysis_id,
                "error": error,
            },
        )


def add_items(*, engine: Engine, backtest_name: str, items: Sequence[Mapping[str, Any]]) -> int:
    """:func:`add_item` of many grid points in one transaction (one ``INSERT … ON CONFLICT DO
    NOTHING`` executed with the list of rows: compiled once, sent in batches). Each item:
    ``symbol``, ``as_of``, ``requested_date``, ``status`` and
    ``analysis_id`` or ``error``. Returns the number inserted (points recorded before: 0)."""
    if not items:
        return 0
    values = [
        {
            "backtest_name": backtest_name,
            "symbol": i["symbol"],
            "as_of": i["as_of"],
            "requested_date": i["requested_date"],
            "status": i["status"],
            "attempt": 0,
            "analysis_id": i.get("analysis_id"),
            "error": i.get("error"),
        }
        for i in items
    ]
    with begin_write(engine) as conn:
        result = conn.execution_options(preserve_rowcount=True).execute(insert_ignore(conn, ITEMS), values)
        return max(result.rowcount, 0)


def retry_item(
    *, engine: Engine, backtest_name: str, symbol: str, as_of: date, attempt: int, analysis_id: str
) -> bool:
    """Point an item at a new analysis (a cancelled one is re-enqueued on resume), only if its
    ``attempt`` is still ``attempt - 1`` (two resumers race: one wins). Returns whether it did."""
    with begin_write(engine) as conn:
        result = conn.execute(
            sa.update(ITEMS)
            .where(
                ITEMS.c.backtest_name == backtest_name,
                ITEMS.c.symbol == symbol,
                ITEMS.c.as_of == as_of,
                ITEMS.c.attempt == attempt - 1,
            )
            .values(attempt=attempt, analysis_id=analysis_id, status="enqueued", error=None)
        )
    return result.rowcount == 1


def items(
    *, engine: Engine, backtest_name: str, tenant: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """The items of a backtest with their analysis's ``analysis_status``, ``analysis_error``,
    ``signal``, ``confidence`` and ``finished_at`` (``None`` when there is no analysis row),
    ordered by symbol and date; only those whose analysis ``tenant`` owns when given (refused
    items, which have none, are then left out), at most ``limit`` when given."""
    stmt = (
        sa.select(
            ITEMS,
            ANALYSES.c.status.label("analysis_status"),
            ANALYSES.c.error.label("analysis_error"),
            ANALYSES.c.signal,
            ANALYSES.c.confidence,
            ANALYSES.c.finished_at,
        )
        .select_from(ITEMS.outerjoin(ANALYSES, ANALYSES.c.id == ITEMS.c.analysis_id))
        .where(ITEMS.c.backtest_name == backtest_name)
        .order_by(ITEMS.c.symbol, ITEMS.c.as_of)
    )
    if tenant is not None:
        stmt = stmt.where(ANALYSES.c.tenant == tenant)
    if limit is not None:
        stmt = stmt.limit(limit)
    return fetch_all(engine, stmt)


def progress_counts(*, engine: Engine, backtest_name: str) -> dict[str, int]:
    """``{state: count}`` over the items of a backtest, one grouped query (the progress bar
    polls it): ``state`` is the analysis status, ``cancelled`` for a failed one whose error is
    ``CANCELLED: …``, ``refused`` for an item refused before enqueueing, ``missing`` for an item
    whose analysis row is absent."""
    label = sa.case(
        (ITEMS.c.status == "refused", "refused"),
        (ANALYSES.c.id.is_(None), "missing"),
        (sa.and_(ANALYSES.c.status == "failed", ANALYSES.c.error.like(f"{CANCELLED}:%")), "cancelled"),
        else_=ANALYSES.c.status,
    )
    stmt = (
        sa.select(label.label("state"), sa.func.count().label("n"))
        .select_from(ITEMS.outerjoin(ANALYSES, ANALYSES.c.id == ITEMS.c.analysis_id))
        .where(ITEMS.c.backtest_name == backtest_name)
        .group_by(label)
    )
    return {str(r["state"]): int(r["n"]) for r in fetch_all(engine, stmt)}


# --------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------


def _json_text(column: Any, *path: str) -> Any:
    return column[path].as_string() if len(path) > 1 else column[path[0]].as_string()


def recommendations(
    *,
    engine: Engine,
    backtest_name: str | None = None,
    since: date | None = None,
    only_unscored_at: Sequence[int] = (),
    limit: int | None = None,
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """Finished (``done``) analyses with a signal: ``analysis_id, symbol, as_of, signal,
    confidence, score, author_kind, author_model, prompt_version, raw_signal`` (the author's own
    signal before calibration; ``None`` in reports written before it), ``probability`` (the
    report's calibrated probabilities, a dict, or ``None``; of an archived analysis only each
    horizon's ``p``: ``db.archive.slim_report``) and ``backtest_name`` (the
    backtest whose item points at it, ``None`` otherwise), oldest ``as_of`` first.

    Args:
        backtest_name: only the analyses of this backtest's items.
        since: only ``as_of >= since``.
        only_unscored_at: only analyses missing a score at one of these horizons.
        limit: at most this many rows.
        tenant: only the analyses this tenant owns (``None``: every tenant's).
    """
    report = ANALYSES.c.report_json
    stmt = (
        sa.select(
            ANALYSES.c.id.label("analysis_id"),
            ANALYSES.c.symbol,
            ANALYSES.c.as_of,
            ANALYSES.c.signal,
            ANALYSES.c.confidence,
            # the raw reading moved under "details" (reports written before keep it at the top)
            sa.func.coalesce(report[("details", "score")].as_float(), report["score"].as_float()).label(
                "score"
            ),
            _json_text(report, "author", "kind").label("author_kind"),
            _json_text(report, "author", "model").label("author_model"),
            report["prompt_version"].as_string().label("prompt_version"),
            sa.func.coalesce(
                _json_text(report, "details", "raw_signal"), report["raw_signal"].as_string()
            ).label("raw_signal"),
            report["probability"].label("probability"),
            ITEMS.c.backtest_name,
        )
        .select_from(ANALYSES.outerjoin(ITEMS, ITEMS.c.analysis_id == ANALYSES.c.id))
        .where(ANALYSES.c.status == "done", ANALYSES.c.signal.is_not(None))
        .order_by(ANALYSES.c.as_of, ANALYSES.c.symbol, ANALYSES.c.id)
    )
    if backtest_name is not None:
        stmt = stmt.where(ITEMS.c.backtest_name == backtest_name)
    if since is not None:
        stmt = stmt.where(ANALYSES.c.as_of >= since)
    if only_unscored_at:
        scored_all = (
            sa.select(sa.func.count())
            .where(SCORES.c.analysis_id == ANALYSES.c.id, SCORES.c.horizon.in_(list(only_unscored_at)))
            .scalar_subquery()
        )
        stmt = stmt.where(scored_all < len(set(only_unscored_at)))
    if tenant is not None:
        stmt = stmt.where(ANALYSES.c.tenant == tenant)
    if limit is not None:
        stmt = stmt.limit(limit)
    return fetch_all(engine, stmt)


def social_views(*, engine: Engine, analysis_ids: Sequence[str]) -> dict[str, tuple[str, float | None]]:
    """``{analysis_id: (label, score)}`` of the social-sentiment view stored in each report
    (``report_json.views.social``, ``agents.analysts.social``); analyses without one are absent."""
    return report_views(engine=engine, analysis_ids=analysis_ids, view="social")


#: Views of a stored report that carry ``label`` and ``score`` (read by :func:`report_views`).
LABELLED_VIEWS = ("social", "learned")


def report_views(
    *, engine: Engine, analysis_ids: Sequence[str], view: str
) -> dict[str, tuple[str, float | None]]:
    """``{analysis_id: (label, score)}`` of the view ``view`` (one of :data:`LABELLED_VIEWS`:
    ``social`` from ``agents.analysts.social``, ``learned`` from ``agents.analysts.learned``)
    stored in each report (``report_json.views.<view>``); analyses without one are absent.
    Raises ``ValueError`` for another view name."""
    if view not in LABELLED_VIEWS:
        raise ValueError(f"view {view!r}: one of {', '.join(LABELLED_VIEWS)}")
    report = ANALYSES.c.report_json
    stmt = sa.select(
        ANALYSES.c.id.label("analysis_id"),
        _json_text(report, "views", view, "label").label("label"),
        report[("views", view, "score")].as_float().label("score"),
    )
    out: dict[str, tuple[str, float | None]] = {}
    for chunk in _chunks(list(analysis_ids)):
        for row in fetch_all(engine, stmt.where(ANALYSES.c.id.in_(chunk))):
            if row["label"]:
                out[str(row["analysis_id"])] = (str(row["label"]), row["score"])
    return out


def report_risks(*, engine: Engine, analysis_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{analysis_id: {symbol, as_of, risk}}`` of the analyses whose report has a risk forecast
    (``report_json.risk``, ``pipeline.report_risk.risk_json``); the others are absent."""
    stmt = sa.select(
        ANALYSES.c.id.label("analysis_id"),
        ANALYSES.c.symbol,
        ANALYSES.c.as_of,
        ANALYSES.c.report_json["risk"].label("risk"),
    )
    out: dict[str, dict[str, Any]] = {}
    for chunk in _chunks(list(analysis_ids)):
        for row in fetch_all(engine, stmt.where(ANALYSES.c.id.in_(chunk))):
            if isinstance(row["risk"], Mapping) and row["risk"].get("horizons"):
                out[str(row["analysis_id"])] = {
                    "symbol": row["symbol"],
                    "as_of": row["as_of"],
                    "risk": row["risk"],
                }
    return out


def insert_scores(*, engine: Engine, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert score rows (columns of ``recommendation_scores``) ON CONFLICT ``(analysis_id,
    horizon)`` DO NOTHING, in one transaction. Returns how many were new."""
    if not rows:
        return 0
    with begin_write(engine) as conn:
        result = conn.execution_options(preserve_rowcount=True).execute(
            insert_ignore(conn, SCORES), [dict(r) for r in rows]
        )
    return max(int(result.rowcount), 0)


def scores(
    *,
    engine: Engine,
    analysis_ids: Sequence[str] | None = None,
    backtest_name: str | None = None,
    since: date | None = None,
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """Stored score rows, filtered by analysis ids, backtest (through its items),
    ``as_of >= since`` or the ``tenant`` owning the analysis (``None``: every tenant's);
    ordered by ``as_of``, symbol, horizon."""
    stmt = sa.select(SCORES).order_by(SCORES.c.as_of, SCORES.c.symbol, SCORES.c.horizon)
    if tenant is not None:
        stmt = stmt.where(
            SCORES.c.analysis_id.in_(sa.select(ANALYSES.c.id).where(ANALYSES.c.tenant == tenant))
        )
    if backtest_name is not None:
        stmt = stmt.where(
            SCORES.c.analysis_id.in_(
                sa.select(ITEMS.c.analysis_id).where(ITEMS.c.backtest_name == backtest_name)
            )
        )
    if since is not None:
        stmt = stmt.where(SCORES.c.as_of >= since)
    if analysis_ids is None:
        return fetch_all(engine, stmt)
    out: list[dict[str, Any]] = []
    for chunk in _chunks(list(analysis_ids)):
        out.extend(fetch_all(engine, stmt.where(SCORES.c.analysis_id.in_(chunk))))
    return out


def delete_scores(*, engine: Engine, keys: Sequence[tuple[str, int]]) -> int:
    """Delete the score rows of ``keys`` (``(analysis_id, horizon)`` pairs), in one transaction,
    so they are scored again on the current basis (``apps.scorecard.build_scorecard`` with
    ``rescore``). Returns how many rows went."""
    by_horizon: dict[int, list[str]] = {}
    for analysis_id, horizon in keys:
        by_horizon.setdefault(int(horizon), []).append(analysis_id)
    deleted = 0
    with begin_write(engine) as conn:
        for horizon, ids in by_horizon.items():
            for chunk in _chunks(ids):
                result = conn.execution_options(preserve_rowcount=True).execute(
                    sa.delete(SCORES).where(SCORES.c.horizon == horizon, SCORES.c.analysis_id.in_(chunk))
                )
                deleted += max(int(result.rowcount), 0)
    return deleted


def universe_on(*, engine: Engine, as_of: date, backtest_name: str | None) -> list[str]:
    """The symbols of "the run" of a recommendation made on ``as_of``: its backtest's symbols,
    else every symbol with a finished analysis as of that date (a watchlist run's tickers)."""
    if backtest_name is not None:
        row = get_backtest(engine=engine, name=backtest_name)
        if row is not None:
            return sorted(row["symbols"])
    stmt = (
        sa.select(ANALYSES.c.symbol)
        .where(ANALYSES.c.as_of == as_of, ANALYSES.c.status.in_(TERMINAL_STATUSES))
        .distinct()
    )
    return sorted(str(r["symbol"]) for r in fetch_all(engine, stmt))
