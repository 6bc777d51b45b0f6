"""Per-key quotas of the HTTP gateway: analyses per minute, analyses in flight, and the
tenant's daily LLM spend (OWASP API Security Top 10 2023, API4 "Unrestricted Resource
Consumption").

* **Per minute**: one token bucket per API key (capacity and refill ``api_analyses_per_minute``
  per minute), the same Redis Lua bucket the remote data vendors use
  (``agents.providers.shared.take_token``), so the limit holds for every API process sharing
  the Redis (the broker when it is Redis, ``Settings.shared_redis_url``). Without a shared
  Redis (embedded mode, a RabbitMQ broker) each process keeps its own bucket.
* **In flight**: the key's analyses that are neither done nor failed, counted in the database
  (the record of truth, seen by every process). Count and insert happen under one lock per key
  (:func:`admission`: a Redis lock shared by the API processes, else a process-local lock), so
  concurrent requests of one key cannot both take the last place.
* **Daily LLM spend**: the sum of ``llm_calls.cost_usd`` of the tenant's analyses since 00:00
  UTC, checked at admission; while an analysis runs, each stage's LLM session also lowers its
  per-analysis budget (``llm_budget_usd``) to what the tenant has left
  (``pipeline.stages.context.within_tenant_budget``). Sessions running at the same time each
  see the same remainder, so the day may end above the cap by at most one per-analysis budget
  per concurrent analysis.

Every refusal is :class:`QuotaExceededError`: HTTP 429 with ``Retry-After`` (seconds).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Final

from agents.providers.shared import SharedStateUnavailableError, redis_client, take_token
from db import repo
from db.engine import get_engine
from pipeline.api.auth import Principal
from pipeline.core.settings import Settings


class QuotaExceededError(Exception):
    """429: a quota of the key or its tenant is spent; ``retry_after`` is whole seconds."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        """``message``: the response's ``detail``; ``retry_after``: the ``Retry-After`` value."""
        super().__init__(message)
        self.retry_after = max(1, retry_after)


#: Longest time one admission (quota checks, validation, row insert, publish) may hold its key's
#: lock: far above the ~0.1-1 s it takes, so the lock only expires for a dead process.
ADMISSION_LOCK_SECONDS: Final = 30
#: How long a request waits for its key's lock (other requests of the key being admitted).
ADMISSION_WAIT_SECONDS: Final = 10

_local_locks: dict[str, threading.Lock] = {}
_local_locks_guard = threading.Lock()


@contextmanager
def admission(*, principal: Principal, settings: Settings) -> Iterator[None]:
    """Hold ``principal``'s admission lock while its quotas are checked and the analysis is
    written, so two requests of one key are admitted one after the other (the in-flight count
    then always sees the other's row). A Redis lock (``finagent:admission:<key_id>``, redis-py's
    ``Lock``: SET NX PX, token-checked release) when the processes share a Redis, else a lock in
    this process.

    Raises:
        QuotaExceededError: the lock was not free within ``ADMISSION_WAIT_SECONDS``.
        SharedStateUnavailableError: the shared Redis did not answer.
    """
    url = settings.shared_redis_url
    if url is None:
        with _local_locks_guard:
            lock = _local_locks.setdefault(principal.key_id, threading.Lock())
        if not lock.acquire(timeout=ADMISSION_WAIT_SECONDS):
            raise QuotaExceededError("too many concurrent requests of this API key", retry_after=1)
        try:
            yield
        finally:
            lock.release()
        return
    import redis  # lazy: only with a shared Redis (service mode); see agents.providers.shared

    try:
        shared = redis_client(url).lock(
            f"finagent:admission:{principal.key_id}",
            timeout=ADMISSION_LOCK_SECONDS,
            blocking_timeout=ADMISSION_WAIT_SECONDS,
        )
        acquired = shared.acquire()
    except redis.RedisError:
        raise SharedStateUnavailableError("the admission lock's Redis did not answer") from None
    if not acquired:
        raise QuotaExceededError("too many concurrent requests of this API key", retry_after=1)
    try:
        yield
    finally:
        # LockNotOwnedError (a RedisError): it expired, the admission took > ADMISSION_LOCK_SECONDS
        with suppress(redis.RedisError):
            shared.release()


def seconds_to_utc_midnight(now: datetime) -> int:
    """Whole seconds from ``now`` (aware) to the next 00:00 UTC, at least 1."""
    now = now.astimezone(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return max(1, math.ceil((midnight - now).total_seconds()))


def admit_analysis(*, principal: Principal, settings: Settings, now: datetime | None = None) -> None:
    """Check the quotas of one new analysis for ``principal``; take a rate token last, so a
    request refused for another reason costs none.

    Raises:
        QuotaExceededError: too many in flight, the tenant's LLM money for the day is spent, or
            the key's bucket is empty.
        agents.providers.shared.SharedStateUnavailableError: the shared Redis did not answer
            (the gateway answers 503: no analysis may go out unmetered).
    """
    engine = get_engine(settings.effective_database_url)
    now = now or datetime.now(UTC)
    in_flight = repo.count_in_flight(engine=engine, api_key_id=principal.key_id)
    if in_flight >= settings.api_max_in_flight:
        raise QuotaExceededError(
            f"this API key has {in_flight} analyses in flight (limit {settings.api_max_in_flight}); "
            "retry when one finishes",
            retry_after=5,
        )
    cap = settings.tenant_daily_llm_budget_usd
    if cap is not None:
        midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        spent = repo.tenant_llm_spend(engine=engine, tenant=principal.tenant, since=midnight)
        if spent >= cap:
            raise QuotaExceededError(
                f"tenant {principal.tenant!r} spent {spent:.2f} USD on LLM calls today (daily cap "
                f"{cap:.2f} USD); the cap resets at 00:00 UTC",
                retry_after=seconds_to_utc_midnight(now),
            )
    per_minute = settings.api_analyses_per_minute
    wait = take_token(
        name=f"api-analyze:{principal.key_id}",
        rate=per_minute / 60.0,
        burst=per_minute,
        redis_url=settings.shared_redis_url,
    )
    if wait > 0:
        raise QuotaExceededError(
            f"this API key may start {per_minute} analyses per minute; retry in {math.ceil(wait)} s",
            retry_after=math.ceil(wait),
        )
