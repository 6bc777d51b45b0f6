"""Schemathesis hooks of the gateway's fuzz run (loaded by ``tests/support/schemathesis.toml``).

* A check beside schemathesis' own: a refused request (4xx) stored nothing. Before each call
  the rows of every table a request could write are counted in ``FINAGENT_SERVICE_DATABASE_URL`` (the
  gateway's database); after a 4xx they must be the same (the audit log is expected to grow,
  so it is not counted). Counting needs one request at a time: the config sets ``workers = 1``.
* A finished run to read: watchlist :data:`DIGEST_WATCHLIST` of the key's tenant
  (``FINAGENT_FUZZ_API_KEY``) with a done run on :data:`DIGEST_RUN_DATE` (no worker finishes a
  run during the fuzz run), made before each digest request if missing. The config pins the
  digest operation's path to it, so every media type of the digest is requested and checked
  against the document.
"""

from __future__ import annotations

import os
from datetime import date
from typing import Any, Final

import schemathesis
import sqlalchemy as sa

from db import ops_repo
from db.engine import get_engine

#: Every table a request of the gateway writes, but ``audit_log``.
STORED_TABLES: Final = (
    "analyses",
    "watchlists",
    "watchlist_runs",
    "idempotency_keys",
    "api_keys",
    "tool_calls",
)
DIGEST_WATCHLIST: Final = "fuzz-digest"
DIGEST_RUN_DATE: Final = date(2013, 2, 28)
_before: dict[str, dict[str, int]] = {}
_tenants: list[str] = []  # the key's tenant, looked up once


def stored_counts(database_url: str) -> dict[str, int]:
    """``{table: rows}`` of :data:`STORED_TABLES` in ``database_url``."""
    with get_engine(database_url).connect() as conn:
        return {
            table: int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in STORED_TABLES
        }


def seed_finished_run(*, database_url: str, tenant: str) -> None:
    """Create :data:`DIGEST_WATCHLIST` of ``tenant`` with a done run (an empty digest) on
    :data:`DIGEST_RUN_DATE`, unless it exists."""
    import tasks  # noqa: F401  # lazy, as below; installs the task queue the watchlist code needs
    from apps import watchlists  # lazy: the Celery app is built from the process settings
    from core.settings import Settings

    settings = Settings(service_database_url=database_url)
    try:
        watchlist = watchlists.get_watchlist(name=DIGEST_WATCHLIST, settings=settings, tenant=tenant)
    except watchlists.WatchlistNotFoundError:
        watchlist = watchlists.create_watchlist(
            name=DIGEST_WATCHLIST, tickers=["AAPL"], settings=settings, tenant=tenant
        )
    engine = get_engine(database_url)
    run_id = ops_repo.run_id_for(watchlist_id=watchlist["id"], run_date=DIGEST_RUN_DATE)
    if (ops_repo.get_run(engine=engine, run_id=run_id) or {}).get("status") == "done":
        return
    run, _ = ops_repo.claim_run(
        engine=engine, watchlist_id=watchlist["id"], run_date=DIGEST_RUN_DATE, trigger="manual"
    )
    digest = watchlists.build_digest(
        name=DIGEST_WATCHLIST,
        run_date=DIGEST_RUN_DATE,
        items=[],
        previous_date=None,
        previous_items=[],
        timeout_s=settings.watchlists.run_timeout,
    )
    ops_repo.finish_run(  # a no-op when the run is done already
        engine=engine,
        run_id=run["id"],
        digest_markdown=watchlists.digest_markdown(digest),
        digest_html=watchlists.digest_html(digest),
        digest_json=digest,
    )


def _environment() -> tuple[str, str]:
    url, key = os.environ.get("FINAGENT_SERVICE_DATABASE_URL"), os.environ.get("FINAGENT_FUZZ_API_KEY")
    if not url or not key:
        raise RuntimeError(
            "set FINAGENT_SERVICE_DATABASE_URL (the gateway's database) and"
            " FINAGENT_FUZZ_API_KEY (docs/api.md)"
        )
    return url, key


def _tenant(url: str, key: str) -> str:
    if not _tenants:
        from apps.api.auth import authenticate
        from core.settings import Settings

        _tenants.append(authenticate(token=key, settings=Settings(service_database_url=url)).tenant)
    return _tenants[0]


_deleted: list[bool] = []  # set once a request deleted the seeded watchlist


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Before a digest request, create the finished run unless a request of the fuzzer has
    deleted its watchlist (it reads names from ``GET /watchlists``): from then on the digest
    must be a 404, which the stateful phase checks ("deleted resource still available"); the
    deletes come from that last phase's links, after the phases that need the digest read.
    Count the stored rows."""
    url, key = _environment()
    if case.method.upper() == "DELETE" and (case.path_parameters or {}).get("name") == DIGEST_WATCHLIST:
        _deleted.append(True)
    if case.operation.path.endswith("/digest") and not _deleted:
        seed_finished_run(database_url=url, tenant=_tenant(url, key))
    _before[case.id] = stored_counts(url)


@schemathesis.check
def refusal_stores_nothing(ctx: Any, response: Any, case: Any) -> bool | None:
    """A 4xx answer left every table of :data:`STORED_TABLES` as it was."""
    before = _before.pop(case.id, None)
    if before is None or not 400 <= response.status_code < 500:
        return None
    after = stored_counts(_environment()[0])
    changed = {table: (before[table], after[table]) for table in before if before[table] != after[table]}
    if changed:
        raise AssertionError(
            f"a {response.status_code} answer stored rows (table: (before, after)): {changed}"
        )
    return None
