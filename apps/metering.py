"""Metering shared by every path that starts analyses for a tenant: the HTTP gateway's keys
(``apps.api.quotas``) and the scheduled watchlist runs of beat (``apps.watchlists``).
OWASP API Security Top 10 2023, API4 "Unrestricted Resource Consumption": no path that costs
worker time or LLM money goes unmetered.

* :func:`exclusive`: one admission at a time per name (an API key, or ``tenant:<name>``), so a
  count taken under it and the rows written under it cannot be overtaken by a concurrent
  admission of the same name. A Redis lock shared by every process when there is a shared
  Redis (``Settings.shared_redis_url``), else a lock in this process.
* :class:`RunQuota`: how many new analyses one watchlist run may start, for whom, and the
  reason every ticker past that number is refused with (the run's answer and its digest list
  each refused ticker with that reason).
* :func:`llm_budget_refusal`: the tenant's daily LLM spend against
  ``tenant_daily_llm_budget_usd``.
* :func:`scheduled_run_quota`: the tenant's allowance for scheduled runs, analyses started by
  beat per UTC day (``tenant_scheduled_analyses_per_day``), counted in the database from the
  analyses themselves (``api_key_id`` = :data:`core.tenancy.SCHEDULED_ENQUEUER`), so
  deleting a watchlist and its runs gives nothing back.

Every refusal is :class:`QuotaExceededError` (HTTP 429 with ``Retry-After`` at the gateway).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from agents.data.market.shared import SharedStateUnavailableError, redis_client
from core.display import usd
from core.settings import Settings
from core.tenancy import SCHEDULED_ENQUEUER
from db import repo
from db.engine import get_engine
from db.redis_store import redis_module


class QuotaExceededError(Exception):
    """429: a quota of the key or its tenant is spent; ``retry_after`` is whole seconds."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        """``message``: the response's ``detail``; ``retry_after``: the ``Retry-After`` value."""
        super().__init__(message)
        self.retry_after = max(1, retry_after)


#: Longest time one admission (quota checks, validation, row inserts, publish) may hold its
#: lock: far above the ~0.1-5 s it takes (a 200-ticker run), so the lock only expires for a
#: dead process.
ADMISSION_LOCK_SECONDS: Final = 60
#: How long a request waits for its name's lock (other admissions of the name in progress).
ADMISSION_WAIT_SECONDS: Final = 10

_local_locks: dict[str, threading.Lock] = {}
_local_locks_guard = threading.Lock()


@contextmanager
def exclusive(*, name: str, settings: Settings, wait: float = ADMISSION_WAIT_SECONDS) -> Iterator[None]:
    """Hold the admission lock of ``name`` (an API key id, or ``tenant:<tenant>``) while quotas
    are checked and the analyses written, so two admissions of one name run one after the other
    (the second's count then sees the first's rows). A Redis lock (``finagent:admission:<name>``,
    redis-py's ``Lock``: SET NX PX, token-checked release) when the processes share a Redis,
    else a lock in this process.

    Raises:
        QuotaExceededError: the lock was not free within ``wait`` seconds.
        SharedStateUnavailableError: the shared Redis did not answer.
    """
    url = settings.service.shared_redis_url
    if url is None:
        with _local_locks_guard:
            lock = _local_locks.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=wait):
            raise QuotaExceededError(f"too many concurrent requests of {_who(name)}", retry_after=1)
        try:
            yield
        finally:
            lock.release()
        return
    redis = redis_module()  # imported only with a shared Redis (service mode)

    try:
        shared = redis_client(url).lock(
            f"finagent:admission:{name}", timeout=ADMISSION_LOCK_SECONDS, blocking_timeout=wait
        )
        acquired = shared.acquire()
    except redis.RedisError:
        raise SharedStateUnavailableError("the admission lock's Redis did not answer") from None
    if not acquired:
        raise QuotaExceededError(f"too many concurrent requests of {_who(name)}", retry_after=1)
    try:
        yield
    finally:
        # LockNotOwnedError (a RedisError): it expired, the admission took > ADMISSION_LOCK_SECONDS
        with suppress(redis.RedisError):
            shared.release()


def _who(name: str) -> str:
    return f"tenant {name.split(':', 1)[1]!r}" if name.startswith("tenant:") else "this API key"


def tenant_lock_name(tenant: str) -> str:
    """The :func:`exclusive` name of ``tenant``'s own admissions (``tenant:<tenant>``; a tenant
    name has no ``:``, an API key id is 12 hex characters, so the two never meet)."""
    return f"tenant:{tenant}"


def seconds_to_utc_midnight(now: datetime) -> int:
    """Whole seconds from ``now`` (aware) to the next 00:00 UTC, at least 1."""
    now = now.astimezone(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return max(1, math.ceil((midnight - now).total_seconds()))


def utc_midnight(now: datetime) -> datetime:
    """00:00 UTC of ``now``'s UTC day (aware)."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def llm_budget_refusal(*, tenant: str, settings: Settings, now: datetime) -> QuotaExceededError | None:
    """The refusal when ``tenant``'s LLM spend since 00:00 UTC (``llm_calls.cost_usd`` of its
    analyses, unknown prices 0) reached ``tenant_daily_llm_budget_usd``, else ``None`` (also
    when no cap is set). ``Retry-After``: the seconds to the next UTC midnight."""
    cap = settings.llm.tenant_daily_budget_usd
    if cap is None:
        return None
    engine = get_engine(settings.service.effective_database_url)
    spent = repo.tenant_llm_spend(engine=engine, tenant=tenant, since=utc_midnight(now))
    if spent < cap:
        return None
    return QuotaExceededError(
        f"tenant {tenant!r} spent {usd(spent)} USD on LLM calls today (daily cap {usd(cap)} USD); "
        "the cap resets at 00:00 UTC",
        retry_after=seconds_to_utc_midnight(now),
    )


@dataclass(frozen=True)
class RunQuota:
    """What one watchlist run may start (``apps.watchlists.start_run``).

    Attributes:
        room: how many new analyses the run may start (tickers refused by validation do not
            use any); every new ticker past it is refused with ``refusal``.
        refusal: the reason stored with each ticker refused for the quota, starting ``quota:``
            (shown in the run's answer and in its digest).
        retry_after: seconds until there may be room again.
        enqueuer: the ``api_key_id`` the run's analyses carry: the calling key's id (they then
            count among its analyses in flight) or :data:`SCHEDULED_ENQUEUER`.
        refuse_whole: with no room at all, refuse the whole run (``QuotaExceededError``, nothing
            stored) instead of storing it with every ticker refused: a caller who can retry
            (HTTP) gets a 429; a scheduled run has nobody to answer, so its digest says it.
    """

    room: int
    refusal: str
    retry_after: int
    enqueuer: str | None
    refuse_whole: bool


def scheduled_run_quota(*, tenant: str, settings: Settings, now: datetime | None = None) -> RunQuota:
    """The allowance of a scheduled (beat) run of ``tenant``: ``tenant_scheduled_analyses_per_day``
    less the analyses its scheduled runs started since 00:00 UTC; no room once the tenant's
    daily LLM budget is spent (:func:`llm_budget_refusal`). Call it under
    ``exclusive(name=tenant_lock_name(tenant))`` so concurrent runs of one tenant share it."""
    now = now or datetime.now(UTC)
    spent = llm_budget_refusal(tenant=tenant, settings=settings, now=now)
    if spent is not None:
        return RunQuota(
            room=0,
            refusal=f"quota: {spent}",
            retry_after=spent.retry_after,
            enqueuer=SCHEDULED_ENQUEUER,
            refuse_whole=False,
        )
    limit = settings.watchlists.tenant_scheduled_analyses_per_day
    started = repo.count_started_since(
        engine=get_engine(settings.service.effective_database_url),
        tenant=tenant,
        api_key_id=SCHEDULED_ENQUEUER,
        since=utc_midnight(now),
    )
    return RunQuota(
        room=max(0, limit - started),
        refusal=(
            f"quota: tenant {tenant!r} may start {limit} analyses a UTC day from scheduled runs "
            f"({started} started before this run; FINAGENT_WATCHLISTS_TENANT_SCHEDULED_ANALYSES_PER_DAY)"
        ),
        retry_after=seconds_to_utc_midnight(now),
        enqueuer=SCHEDULED_ENQUEUER,
        refuse_whole=False,
    )
