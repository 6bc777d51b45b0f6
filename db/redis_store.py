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

from functools import lru_cache
from types import ModuleType
from typing import Any


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
