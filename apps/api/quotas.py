"""Per-key quotas of the HTTP gateway: analyses per minute, analyses in flight, and the
tenant's daily LLM spend (OWASP API Security Top 10 2023, API4 "Unrestricted Resource
Consumption").

* **Per minute**: one token bucket per API key (capacity and refill ``api.analyses_per_minute``
  per minute), the same Redis Lua bucket the remote data vendors use
  (``agents.data.market.shared.take_token``), so the limit holds for every API process sharing
  the Redis (the broker when it is Redis, ``Settings.shared_redis_url``). Without a shared
  Redis (embedded mode, a RabbitMQ broker) each process keeps its own bucket.
* **In flight**: the key's analyses that are neither done nor failed, counted in the database
  (the record of truth, seen by every process). Count and insert happen under one lock per key
  (:func:`admission`: a Redis lock shared by the API processes, else a process-local lock), so
  concurrent requests of one key cannot both take the last place.
* **Daily LLM spend**: the sum of ``llm_calls.cost_usd`` of the tenant's analyses since 00:00
  UTC, checked at admission; while an analysis runs, each stage's LLM session also lowers its
  per-analysis budget (``llm.budget_usd``) to what the tenant has left
  (``pipeline.steps.context.within_tenant_budget``). Sessions running at the same time each
  see the same remainder, so the day may end above the cap by at most one per-analysis budget
  per concurrent analysis.
* **Watchlist runs** (``POST /watchlists/{name}/runs``): every ticker of a run is one analysis
  of the calling key, against the same three quotas (:func:`run_quota`, :func:`charge_run`):
  the run starts as many tickers as the key's in-flight room and its bucket's tokens allow, in
  the watchlist's order, and refuses the rest with the reason (the answer's ``refused`` and the
  digest list them). With no room at all the run is refused whole (429, nothing stored). The
  analyses carry the key's id, so they count among its analyses in flight until they finish.

The lock, the error and the tenant's LLM check live in ``apps.metering``, shared with the
scheduled runs of beat (which count against the tenant, not a key). Every refusal is
:class:`QuotaExceededError`: HTTP 429 with ``Retry-After`` (seconds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from agents.data.market.shared import available_tokens, take_token
from apps.api.auth import Principal
from apps.metering import QuotaExceededError as QuotaExceededError
from apps.metering import RunQuota, exclusive, llm_budget_refusal
from apps.metering import seconds_to_utc_midnight as seconds_to_utc_midnight
from core.settings import Settings
from db import repo
from db.engine import get_engine


@contextmanager
def admission(*, principal: Principal, settings: Settings) -> Iterator[None]:
    """Hold ``principal``'s admission lock while its quotas are checked and its analyses are
    written, so two requests of one key are admitted one after the other (the in-flight count
    then always sees the other's rows): ``apps.metering.exclusive`` named by the key id.

    Raises:
        QuotaExceededError: the lock was not free within ``ADMISSION_WAIT_SECONDS``.
        SharedStateUnavailableError: the shared Redis did not answer.
    """
    with exclusive(name=principal.key_id, settings=settings):
        yield


def _bucket(principal: Principal) -> str:
    return f"api-analyze:{principal.key_id}"


def _in_flight_refusal(*, principal: Principal, in_flight: int, settings: Settings) -> str:
    return (
        f"quota: {settings.api.max_in_flight} analyses in flight for API key {principal.name!r} "
        f"(fa_{principal.key_id}_…), {in_flight} before this run; retry when some finish"
    )


def admit_analysis(*, principal: Principal, settings: Settings, now: datetime | None = None) -> None:
    """Check the quotas of one new analysis for ``principal``; take a rate token last, so a
    request refused for another reason costs none.

    Raises:
        QuotaExceededError: too many in flight, the tenant's LLM money for the day is spent, or
            the key's bucket is empty.
        agents.data.market.shared.SharedStateUnavailableError: the shared Redis did not answer
            (the gateway answers 503: no analysis may go out unmetered).
    """
    engine = get_engine(settings.service.effective_database_url)
    now = now or datetime.now(UTC)
    in_flight = repo.count_in_flight(engine=engine, api_key_id=principal.key_id)
    if in_flight >= settings.api.max_in_flight:
        raise QuotaExceededError(
            f"this API key has {in_flight} analyses in flight (limit {settings.api.max_in_flight}); "
            "retry when one finishes",
            retry_after=5,
        )
    spent = llm_budget_refusal(tenant=principal.tenant, settings=settings, now=now)
    if spent is not None:
        raise spent
    per_minute = settings.api.analyses_per_minute
    wait = take_token(
        name=_bucket(principal),
        rate=per_minute / 60.0,
        burst=per_minute,
        redis_url=settings.service.shared_redis_url,
    )
    if wait > 0:
        raise QuotaExceededError(
            f"this API key may start {per_minute} analyses per minute; retry in {math.ceil(wait)} s",
            retry_after=math.ceil(wait),
        )


def run_quota(*, principal: Principal, settings: Settings, now: datetime | None = None) -> RunQuota:
    """The :class:`~apps.metering.RunQuota` of a watchlist run started by ``principal``:
    room = the smaller of the key's free in-flight places (``api.max_in_flight`` less its
    unfinished analyses) and the whole tokens in its per-minute bucket (read, not taken:
    :func:`charge_run` takes what the run used). Call it and start the run inside
    :func:`admission`, which keeps every other taker of this key's places and tokens out.

    The refusal names the limit that binds (in flight, or per minute with the seconds until
    the next token). ``refuse_whole``: a run with no room at all is a 429.

    Raises:
        QuotaExceededError: the tenant's LLM money for the day is spent (the whole run).
        agents.data.market.shared.SharedStateUnavailableError: the shared Redis did not answer.
    """
    now = now or datetime.now(UTC)
    spent = llm_budget_refusal(tenant=principal.tenant, settings=settings, now=now)
    if spent is not None:
        raise spent
    engine = get_engine(settings.service.effective_database_url)
    in_flight = repo.count_in_flight(engine=engine, api_key_id=principal.key_id)
    places = max(0, settings.api.max_in_flight - in_flight)
    per_minute = settings.api.analyses_per_minute
    rate = per_minute / 60.0
    tokens = available_tokens(
        name=_bucket(principal), rate=rate, burst=per_minute, redis_url=settings.service.shared_redis_url
    )
    whole = math.floor(tokens)
    if places <= whole:
        return RunQuota(
            room=places,
            refusal=_in_flight_refusal(principal=principal, in_flight=in_flight, settings=settings),
            retry_after=5,
            enqueuer=principal.key_id,
            refuse_whole=True,
        )
    wait = math.ceil((whole + 1 - tokens) / rate)
    return RunQuota(
        room=whole,
        refusal=(
            f"quota: {per_minute} analyses per minute for API key {principal.name!r} "
            f"(fa_{principal.key_id}_…), {whole} left for this run; retry in {wait} s"
        ),
        retry_after=wait,
        enqueuer=principal.key_id,
        refuse_whole=True,
    )


def charge_run(*, principal: Principal, settings: Settings, started: int) -> None:
    """Take ``started`` tokens (the analyses a run just enqueued) from ``principal``'s bucket.
    Inside :func:`admission` after :func:`run_quota` the tokens are there; should the lock have
    expired meanwhile (a run over ``ADMISSION_LOCK_SECONDS``) and another request taken them,
    nothing is taken and the bucket is not overdrawn (the run is started already).

    Raises:
        agents.data.market.shared.SharedStateUnavailableError: the shared Redis did not answer.
    """
    if started <= 0:
        return
    per_minute = settings.api.analyses_per_minute
    take_token(
        name=_bucket(principal),
        rate=per_minute / 60.0,
        burst=per_minute,
        redis_url=settings.service.shared_redis_url,
        n=min(started, per_minute),
    )
