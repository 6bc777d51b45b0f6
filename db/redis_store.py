"""The one place finagent makes Redis clients.

Who uses Redis besides the broker (each through this module): the sessions of follow-up
questions (``pipeline.sessions``), the token buckets of vendors and of the gateway, the shared
bar cache and the admission locks (``agents.data.market.shared``, ``apps.metering``), the risk
forecasts an analysis's steps share (``agents.tools.risk``), the recovery sweeper's broker
marker (``apps.sweeper``) and ``finagent doctor``'s probe. The ``redis`` package is imported at
the first client: it takes about half a second to import, which embedded mode (no Redis at all)
must not pay.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)


def redis_module() -> ModuleType:
    """The ``redis`` package, imported on first use (see the module docstring); its errors
    (``redis_module().RedisError``) are what a caller catches."""
    import redis  # lazy: see the module docstring

    return redis


@lru_cache(maxsize=4)
def shared_client(url: str) -> Any:
    """The process's Redis client for ``url`` (one per process and URL; 5 s socket timeout): the
    token buckets, the bar cache and the admission locks share it."""
    return redis_module().Redis.from_url(url, socket_timeout=5)


def new_client(url: str, *, socket_timeout: float, socket_connect_timeout: float | None = None) -> Any:
    """A Redis client of its own for ``url`` (a connection pool of its own; the caller closes it
    or keeps it for its life): ``socket_timeout`` / ``socket_connect_timeout`` in seconds
    (``None``: redis-py's default, no connect timeout)."""
    return redis_module().Redis.from_url(
        url, socket_timeout=socket_timeout, socket_connect_timeout=socket_connect_timeout
    )


def cache_get(url: str, key: str, *, what: str, level: int = logging.WARNING) -> bytes | None:
    """The bytes stored under ``key`` in the shared Redis at ``url``, or ``None`` when there are
    none or Redis fails: a cache only saves work, so a failure is logged at ``level`` as
    "shared <what> unavailable" and read as a miss. Used by the bar cache and the risk forecasts."""
    try:
        raw = shared_client(url).get(key)
    except redis_module().RedisError as exc:
        logger.log(level, "shared %s unavailable (%s): a cache miss", what, type(exc).__name__)
        return None
    return None if raw is None else bytes(raw)


def cache_set(
    url: str, key: str, value: bytes | str, *, ttl: int, what: str, level: int = logging.WARNING
) -> None:
    """Store ``value`` under ``key`` for ``ttl`` seconds in the shared Redis at ``url``; a Redis
    failure is logged at ``level`` ("shared <what> not stored"), not raised: what was computed
    stands, only its reuse is lost."""
    try:
        shared_client(url).set(key, value, ex=ttl)
    except redis_module().RedisError as exc:
        logger.log(level, "shared %s not stored (%s)", what, type(exc).__name__)
