"""State shared by all workers for *remote* market-data providers.

* A token bucket per provider in Redis (one Lua script: atomic refill-and-take), so the vendor's
  rate limit holds for all worker processes together; Celery's own ``rate_limit`` is per worker
  (docs/design.md, "Celery configuration"). Without Redis (embedded mode) the bucket lives in
  this process.
* A bar cache in Redis: one fetch per (provider, symbol, window) serves every agent of an
  analysis and later analyses in any worker, for ``bars_cache_ttl`` seconds.

Offline providers (embedded, csv) read local files faster than Redis answers, so only providers
with a true ``remote`` attribute go through here (``agents.tools.bars.fetch_bars``).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pandas as pd

from agents.data.market.base import ProviderConnectionError
from db.redis_store import cache_get, cache_set, redis_module, shared_client

logger = logging.getLogger(__name__)

# KEYS[1] bucket; ARGV: rate (tokens/s), capacity, now (s), n (tokens wanted). Returns 0 when the n
# tokens were taken, else the seconds until n are available (nothing taken; as a string, Redis
# truncates floats to integers).
_TAKE = """
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local rate, capacity, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local n = tonumber(ARGV[4]) or 1
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= n then tokens = tokens - n else wait = (n - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 60)
return tostring(wait)
"""


def _redis() -> ModuleType:
    """The ``redis`` package, imported on first use (``db.redis_store``): only a remote provider
    with a shared Redis (service mode) calls into it, and importers of this module (the Alpaca
    broker) should not pay its import in embedded mode."""
    return redis_module()


def redis_client(url: str) -> Any:
    """The process's Redis client for ``url`` (``db.redis_store.shared_client``)."""
    return shared_client(url)


@dataclass
class _LocalBucket:
    tokens: float
    ts: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: when the bucket is full again (then it equals no bucket and may be dropped)
    full_at: float = 0.0


_local: dict[str, _LocalBucket] = {}
_local_lock = threading.Lock()
#: Buckets kept in a process before the full ones are dropped: per-address buckets of the
#: gateway (``apps.api.abuse``) would otherwise grow with every client ever seen.
LOCAL_BUCKETS_MAX = 10_000


def _local_bucket(name: str, *, burst: int, now: float) -> _LocalBucket:
    with _local_lock:
        if name not in _local and len(_local) >= LOCAL_BUCKETS_MAX:
            for stale in [k for k, b in _local.items() if b.full_at <= now]:
                del _local[stale]
        return _local.setdefault(name, _LocalBucket(tokens=float(burst), ts=now))


class SharedStateUnavailableError(ProviderConnectionError):
    """The shared Redis did not answer, so the shared rate limit cannot be enforced
    (``NETWORK_ERROR``: transient, the task retries later). The message names the failure
    class only, never the Redis URL (it may carry a password)."""


def take_token(*, name: str, rate: float, burst: int, redis_url: str | None, n: int = 1) -> float:
    """Take ``n`` request tokens (1 <= n <= ``burst``) of bucket ``name``; return 0.0, or the
    seconds to wait until ``n`` are available when the bucket (``rate`` tokens/s, capacity
    ``burst``) holds fewer. Nothing is taken when it holds fewer than ``n``.

    Raises:
        SharedStateUnavailableError: ``redis_url`` is set and Redis fails (down, timeout): no
            request may go out unmetered, so the caller reports NETWORK_ERROR and retries later.
    """
    now = time.time()
    if redis_url:
        redis = _redis()
        try:
            client = redis_client(redis_url)
            return float(client.eval(_TAKE, 1, f"finagent:ratelimit:{name}", rate, burst, now, n))
        except redis.RedisError as exc:
            raise SharedStateUnavailableError(
                f"the shared Redis of the {name} rate limit did not answer ({type(exc).__name__}); "
                "no request was sent"
            ) from None
    bucket = _local_bucket(name, burst=burst, now=now)
    with bucket.lock:
        bucket.tokens = min(float(burst), bucket.tokens + max(0.0, now - bucket.ts) * rate)
        bucket.ts = now
        wait = 0.0
        if bucket.tokens >= n:
            bucket.tokens -= n
        else:
            wait = (n - bucket.tokens) / rate
        bucket.full_at = now + (burst - bucket.tokens) / rate
        return wait


def available_tokens(*, name: str, rate: float, burst: int, redis_url: str | None) -> float:
    """The tokens bucket ``name`` holds now (refilled to this moment, at most ``burst``), read
    without taking any: how many requests :func:`take_token` would allow at once. Used under a
    lock that serialises every taker of the bucket (``apps.metering.exclusive``), so the
    count still holds when the caller takes them.

    Raises:
        SharedStateUnavailableError: ``redis_url`` is set and Redis fails.
    """
    now = time.time()
    if redis_url:
        redis = _redis()
        try:
            tokens, ts = redis_client(redis_url).hmget(f"finagent:ratelimit:{name}", "tokens", "ts")
        except redis.RedisError as exc:
            raise SharedStateUnavailableError(
                f"the shared Redis of the {name} rate limit did not answer ({type(exc).__name__})"
            ) from None
        if tokens is None or ts is None:
            return float(burst)
        return min(float(burst), float(tokens) + max(0.0, now - float(ts)) * rate)
    with _local_lock:
        bucket = _local.get(name)
    if bucket is None:
        return float(burst)
    with bucket.lock:
        return min(float(burst), bucket.tokens + max(0.0, now - bucket.ts) * rate)


def cache_key(*, provider: str, symbol: str, start: object, end: object) -> str:
    """The Redis key of one bar window."""
    return f"finagent:bars:{provider}:{symbol}:{start}:{end}"


def get_cached_bars(*, redis_url: str, key: str) -> pd.DataFrame | None:
    """The cached frame under ``key``, or ``None`` (JSON "split" orient; index restored). A Redis
    failure is a cache miss (logged as a warning, ``db.redis_store.cache_get``): the cache only
    saves fetches."""
    raw = cache_get(redis_url, key, what="bar cache")
    if raw is None:
        return None
    frame = pd.read_json(io.StringIO(raw.decode()), orient="split")
    frame.index = pd.DatetimeIndex(frame.index, name="date")
    return frame.astype("float64")


def put_cached_bars(*, redis_url: str, key: str, frame: pd.DataFrame, ttl: int) -> None:
    """Store ``frame`` under ``key`` for ``ttl`` seconds (a Redis failure is logged, not raised:
    the bars were fetched, only later reuse is lost)."""
    # double_precision=15 (the maximum): the default of 10 significant digits rounds prices.
    payload = frame.to_json(orient="split", date_format="iso", double_precision=15)
    cache_set(redis_url, key, payload, ttl=ttl, what="bar cache")
