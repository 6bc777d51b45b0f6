"""The configured data's tickers and date span, which the new-analysis form suggests
(``apps.doctor.data_span``, cached per process: reading a large CSV folder's span takes
seconds, and the data changes by a download, not between two page views)."""

from __future__ import annotations

import threading
import time
from typing import Any, Final

from core.settings import Settings

#: Seconds the new-analysis form reuses a data span (reading a large CSV folder's span takes
#: seconds; the data changes by a download, not between two page views).
SPAN_TTL_S: Final = 600.0
_span_cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
_span_lock = threading.Lock()


def _span_key(settings: Settings) -> tuple[Any, ...]:
    return (settings.data.provider, str(settings.data.dir))


def suggested_span(settings: Settings) -> Any:
    """The configured bar data's tickers and span (``apps.doctor.DataSpan``), read at most
    once every :data:`SPAN_TTL_S` seconds per process; ``None`` when it cannot be read (the form
    then suggests nothing)."""
    from apps.doctor import data_span  # lazy: the providers

    key = _span_key(settings)
    now = time.monotonic()
    with _span_lock:
        found = _span_cache.get(key)
        if found is not None and now - found[0] < SPAN_TTL_S:
            return found[1]
    try:
        span = data_span(settings=settings, budget=3.0)
    except (ValueError, OSError):
        span = None
    with _span_lock:
        _span_cache[key] = (now, span)
    return span
