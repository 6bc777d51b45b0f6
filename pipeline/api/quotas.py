"""Per-key quotas of the HTTP gateway: analyses per minute, analyses in flight, and the
tenant's daily LLM spend (OWASP API Security Top 10 2023, API4 "Unrestricted Resource
Consumption").

* **Per minute**: one token bucket per API key (capacity and refill ``api_analyses_per_minute``
  per minute), the same Redis Lua bucket the remote data vendors use
  (``agents.providers.shared.take_token``), so the limit holds for every API process sharing
  the Redis (the broker when it is Redis, ``Settings.shared_redis_url``). Without a shared
  Redis (embedded mode, a RabbitMQ broker) each process keeps its own bucket.
* **In flight**: the key's analyses that are neither done nor failed, counted in the database
  (the record of truth, seen by every process). Two requests racing at the limit may both pass
  (count, then insert): the bound may be exceeded by the number of API threads at once.
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
from datetime import UTC, datetime, timedelta

from agents.providers.shared import take_token
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
