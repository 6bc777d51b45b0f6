"""Celery tasks of the nightly watchlist runs: thin adapters over ``apps.watchlists``.

* ``finagent.watchlists.tick`` (sent by beat every ``watchlists.tick_seconds``): start a
  ``finagent.watchlists.start_run`` task per due watchlist, and try to finalize open runs
  (the backstop for a lost finaliser message).
* ``finagent.watchlists.start_run``: create the run once per (watchlist, date) and fan out.
* ``finagent.watchlists.finalize``: write the digest when every analysis finished; otherwise
  re-enqueue itself after ``watchlists.finalize_countdown`` s, at most
  ``watchlist_run_timeout / countdown + 2`` times (after the timeout ``finalize_run`` closes the
  run anyway, reporting the unfinished analyses as failures).

All three are idempotent (see ``apps.watchlists``), so ``acks_late`` is safe.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime
from typing import Any

from celery import Task

from apps import watchlists
from core.settings import get_settings
from core.tenancy import DEFAULT_TENANT
from tasks.base import declare

logger = logging.getLogger("finagent.tasks.watchlists")


# send_events=False: beat sends it every FINAGENT_WATCHLISTS_TICK_SECONDS; in Flower it buried
# the stage tasks (tasks.app.QUIET_TASKS)
@declare(name="finagent.watchlists.tick", send_events=False)
def tick_task(now: str | None = None) -> dict[str, Any]:
    """Start due watchlist runs and finalize finished ones. ``now``: ISO datetime that decides
    which watchlists are due (tests simulate a fire time; default the current UTC time). Run
    timeouts are always measured on the real clock: runs are created at real time, and a
    simulated future ``now`` would time out a run that was just started.
    Returns ``{"due": [[name, date], ...], "finalized": n}``."""
    settings = get_settings()
    moment = datetime.fromisoformat(now) if now else datetime.now(UTC)
    due = watchlists.due_watchlists(now=moment, settings=settings)
    for name, run_date, tenant in due:
        start_run_task.delay(name, run_date.isoformat(), "beat", tenant)
    finalized = watchlists.finalize_open_runs(settings=settings)
    if due or finalized:
        logger.info("watchlist tick: %d due, %d runs finalized", len(due), finalized)
    return {"due": [[name, d.isoformat()] for name, d, _ in due], "finalized": finalized}


@declare(name="finagent.watchlists.start_run")
def start_run_task(
    name: str, run_date: str, trigger: str = "beat", tenant: str = DEFAULT_TENANT
) -> dict[str, Any]:
    """Start the run of ``tenant``'s watchlist ``name`` on ``run_date`` (ISO date); a repeat is
    a no-op. Messages sent before tenants existed have no ``tenant``: the default tenant's.
    A scheduled run (``trigger`` ``beat``) is metered against the tenant
    (``watchlists.start_scheduled_run``); ``manual``/``api`` messages start unmetered, as the
    CLI does (the gateway meters its runs itself and never sends this task).
    Returns ``{run_id, created, enqueued, refused}``."""
    day = date.fromisoformat(run_date)
    settings = get_settings()
    if trigger in ("api", "manual"):
        started = watchlists.start_run(
            name=name,
            tenant=tenant,
            run_date=day,
            trigger="api" if trigger == "api" else "manual",
            settings=settings,
        )
    else:
        started = watchlists.start_scheduled_run(name=name, tenant=tenant, run_date=day, settings=settings)
    logger.info(
        "watchlist %s %s: run %s (created=%s, enqueued=%d, refused=%d)",
        name,
        run_date,
        started.run["id"],
        started.created,
        len(started.enqueued),
        len(started.refused),
    )
    return {
        "run_id": started.run["id"],
        "created": started.created,
        "enqueued": started.enqueued,
        "refused": started.refused,
    }


@declare(name=watchlists.FINALIZE_TASK, bind=True)
def finalize_run_task(self: Task, run_id: str, attempt: int = 0) -> bool:
    """Finalize run ``run_id`` or check again later (bounded, see the module docstring).
    Returns whether the run is done."""
    settings = get_settings()
    if watchlists.finalize_run(run_id=run_id, settings=settings):
        return True
    cap = settings.watchlists.run_timeout // settings.watchlists.finalize_countdown + 2
    if attempt + 1 < cap:
        self.apply_async((run_id, attempt + 1), countdown=settings.watchlists.finalize_countdown)
    else:
        logger.warning("watchlist run %s: finalizer gave up after %d checks; beat ticks retry", run_id, cap)
    return False
